"""Kubernetes I/O of the setup, teardown and checks, on the Airflow connection's client.

Every request runs inside ``cluster_errors.api_errors``: what callers see is the pipeline's
``ClusterError`` family, never the client's exceptions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Self

from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
from kubernetes import client, watch
from kubernetes.dynamic import DynamicClient

from kai_scale.hooks.cluster_errors import Gone, KindNotServed, NotFound, api_errors
from kai_scale_model import labels
from kai_scale_model.waiting import Deadline

NODE_PAGE = 500


@dataclass(frozen=True, kw_only=True)
class GpuHolder:
    """A pod that holds GPUs of a node."""

    namespace: str
    """Its namespace."""
    name: str
    """Its name."""
    labels: dict[str, str]
    """Its labels (who made it)."""
    count: int
    """GPUs it holds (its containers' limits)."""


class ClusterHook(KubernetesHook):
    """Reads and changes objects in the target cluster (a ``kubernetes`` connection). Clients are lazy.

    :param conn_id: Airflow connection of the cluster.
    """

    hook_name = "KAI scale target cluster"

    def __init__(self, *, conn_id: str) -> None:
        super().__init__(conn_id=conn_id)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections this hook opened to the API server.

        Its client is in a reference cycle (the dynamic client's discovery refers back to it): without
        this its sockets stay open until the garbage collector finds the cycle, at any later time.
        """
        api_client = self.__dict__.get("api_client")  # None: never connected
        if api_client is None:
            return
        pools = api_client.rest_client.pool_manager.pools
        # urllib3 2.8's PoolManager.clear() only forgets its pools; closing one closes its connections.
        for key in pools.keys():  # noqa: SIM118 -- the container refuses iteration (not thread-safe)
            pools[key].close()
        pools.clear()
        api_client.close()

    @cached_property
    def dynamic(self) -> DynamicClient:
        """A client for any kind, discovered from the API server."""
        client = DynamicClient(self.api_client)
        # Its discovery is cached in a file shared by every process on the worker, per API server URL:
        # kinds of an older cluster at the same URL would be taken as served (and 404 when listed).
        client.resources.invalidate_cache()
        return client

    def _api(self, what: str) -> AbstractContextManager[None]:
        """Around each request: its errors raised as the pipeline's (``cluster_errors``)."""
        return api_errors(what, conn_id=str(self.conn_id), host=self._host)

    def _host(self) -> str:
        api_client = self.__dict__.get("api_client")  # None: the client could not be made
        return str(api_client.configuration.host) if api_client else "(no client: see the error)"

    @cached_property
    def extensions_client(self) -> client.ApiextensionsV1Api:
        """CustomResourceDefinitions, on the connection's client (``KubernetesHook`` has none)."""
        return client.ApiextensionsV1Api(self.api_client)

    def server_version(self) -> str:
        """The API server's version; raises ``ClusterUnreachable`` when it does not answer."""
        with self._api("read its version"):
            info = client.VersionApi(self.api_client).get_code(_request_timeout=15)
        return str(info.git_version)

    def crd_exists(self, name: str) -> bool:
        """Whether the CustomResourceDefinition ``name`` is installed."""
        try:
            with self._api(f"read CustomResourceDefinition {name}"):
                self.extensions_client.read_custom_resource_definition(name)
        except NotFound:
            return False
        return True

    def crd_established(self, name: str) -> bool:
        """Whether the CustomResourceDefinition is Established (served); False when it does not exist."""
        try:
            with self._api(f"read CustomResourceDefinition {name}"):
                crd = self.extensions_client.read_custom_resource_definition(name)
        except NotFound:
            return False
        conditions = (crd.status.conditions if crd.status else None) or []
        if not any(c.type == "Established" and c.status == "True" for c in conditions):
            return False
        # The dynamic client learned the served kinds before this one existed.
        self.dynamic.resources.invalidate_cache()
        return True

    def _resource(self, api_version: str, kind: str) -> Any:
        return self.dynamic.resources.get(api_version=api_version, kind=kind)

    def get(
        self, *, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The object as a dict, or None when it (or its kind) does not exist."""
        try:
            with self._api(f"read {kind} {name}"):
                found = self._resource(api_version, kind).get(name=name, namespace=namespace)
        except NotFound:
            return None
        return dict(found.to_dict())

    def apply(self, documents: Iterable[dict[str, Any]]) -> list[str]:
        """Server-side apply each object (creating or updating it); returns ``kind/name`` of each."""
        applied = []
        for document in documents:
            metadata = document["metadata"]
            with self._api(f"apply {document['kind']} {metadata['name']}"):
                self._resource(document["apiVersion"], document["kind"]).server_side_apply(
                    body=document,
                    name=metadata["name"],
                    namespace=metadata.get("namespace"),
                    field_manager=labels.MANAGER,  # the pipeline's name, as its objects' managed-by
                    force_conflicts=True,
                )
            applied.append(f"{document['kind']}/{metadata['name']}")
        return applied

    def merge_patch(
        self, *, api_version: str, kind: str, name: str, patch: dict[str, Any], namespace: str | None = None
    ) -> None:
        """JSON merge patch of one object."""
        with self._api(f"patch {kind} {name}"):
            self._resource(api_version, kind).patch(
                body=patch, name=name, namespace=namespace, content_type="application/merge-patch+json"
            )

    def drop_finalizers(
        self, *, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> bool:
        """Remove every finalizer of one object; False when it did not exist (any more)."""
        try:
            self.merge_patch(
                api_version=api_version,
                kind=kind,
                name=name,
                namespace=namespace,
                patch={"metadata": {"finalizers": None}},
            )
        except NotFound:
            return False
        return True

    def delete(self, *, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Delete one object; False when it did not exist."""
        try:
            with self._api(f"delete {kind} {name}"):
                self._resource(api_version, kind).delete(name=name, namespace=namespace)
        except NotFound:
            return False
        return True

    def delete_pods_now(self, *, namespace: str | None = None, selector: str | None = None) -> int:
        """Delete pods at once (grace 0), in a namespace or all, optionally by label.

        For pods of simulated (KWOK) nodes, which no kubelet stops gracefully.
        """
        core = self.core_v1_client
        with self._api(f"list the pods of {f'namespace {namespace}' if namespace else 'all namespaces'}"):
            pods = (
                core.list_namespaced_pod(namespace, label_selector=selector).items
                if namespace
                else core.list_pod_for_all_namespaces(label_selector=selector).items
            )
        for pod in pods:
            name, pod_namespace = pod.metadata.name, pod.metadata.namespace
            # NotFound: gone meanwhile.
            with suppress(NotFound), self._api(f"delete pod {pod_namespace}/{name}"):
                core.delete_namespaced_pod(name, pod_namespace, grace_period_seconds=0)
        return len(pods)

    def delete_labelled(self, *, api_version: str, kind: str, selector: str) -> int:
        """Delete every object of a kind, in all namespaces, that matches the label selector."""
        try:
            with self._api(f"list the {kind}s labelled {selector}"):
                resource = self._resource(api_version, kind)
                items = resource.get(label_selector=selector).items
        except KindNotServed:
            return 0
        for item in items:
            # NotFound: gone meanwhile.
            with suppress(NotFound), self._api(f"delete {kind} {item.metadata.name}"):
                resource.delete(name=item.metadata.name, namespace=item.metadata.namespace)
        return len(items)

    def names(self, *, api_version: str, kind: str, selector: str | None = None) -> list[str]:
        """Names of the objects of a cluster-scoped kind, optionally by label (empty: kind not served)."""
        try:
            with self._api(f"list the {kind}s"):
                items = self._resource(api_version, kind).get(label_selector=selector).items
        except NotFound:  # not served, or no longer
            return []
        return sorted(item.metadata.name for item in items)

    def wait_for_ready_nodes(
        self, *, selector: str, resource: str, count: int, timeout_seconds: float
    ) -> tuple[int, int]:
        """Wait until ``count`` nodes matching ``selector`` are Ready with ``resource``; (matching, ready).

        One paginated list, then a watch of the changes (re-listed when the server answers 410 Gone),
        instead of listing thousands of nodes every few seconds. Returns at ``count`` ready or at the
        deadline, whichever is first.
        """
        core = self.core_v1_client
        deadline = Deadline(seconds=timeout_seconds)
        nodes, resource_version = self._list_nodes(core, selector=selector, resource=resource)
        while sum(nodes.values()) < count and (remaining := deadline.remaining()) > 0:
            stream = watch.Watch().stream(
                core.list_node,
                label_selector=selector,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=max(1, int(min(remaining, 60))),
            )
            try:
                with self._api(f"watch the nodes labelled {selector}"):
                    for event in stream:
                        resource_version = event["raw_object"]["metadata"]["resourceVersion"]
                        node = event["object"]
                        if event["type"] == "DELETED":
                            nodes.pop(node.metadata.name, None)
                        elif event["type"] in ("ADDED", "MODIFIED"):
                            nodes[node.metadata.name] = _ready_with(node, resource)
                        if sum(nodes.values()) >= count:
                            break
            except Gone:
                nodes, resource_version = self._list_nodes(core, selector=selector, resource=resource)
        return len(nodes), sum(nodes.values())

    def _list_nodes(
        self, core: client.CoreV1Api, *, selector: str, resource: str
    ) -> tuple[dict[str, bool], str]:
        """Every matching node's readiness, in pages, and the resourceVersion to watch from."""
        nodes: dict[str, bool] = {}
        token = None
        while True:
            with self._api(f"list the nodes labelled {selector}"):
                page = core.list_node(label_selector=selector, limit=NODE_PAGE, _continue=token)
            nodes.update({node.metadata.name: _ready_with(node, resource) for node in page.items})
            token = page.metadata._continue
            if not token:
                return nodes, str(page.metadata.resource_version)

    def gpu_holders(self, resource: str) -> list[GpuHolder]:
        """Pods bound to a node and not finished that request ``resource``: who holds the GPUs."""
        with self._api("list the pods bound to a node"):
            response = self.core_v1_client.list_pod_for_all_namespaces(
                field_selector="spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed",
                _preload_content=False,
            )
        holders = []
        for pod in json.loads(response.data)["items"]:
            containers = pod["spec"].get("containers") or []
            # An extended resource's request equals its limit; the limit is always set.
            count = sum(
                int(((c.get("resources") or {}).get("limits") or {}).get(resource, 0)) for c in containers
            )
            if count:
                holders.append(
                    GpuHolder(
                        namespace=pod["metadata"]["namespace"],
                        name=pod["metadata"]["name"],
                        labels=pod["metadata"].get("labels") or {},
                        count=count,
                    )
                )
        return holders

    def node_count(self) -> int:
        """How many nodes the cluster has (one small request: the API server counts the rest).

        Raises ``ClusterUnreachable`` when the cluster does not answer.
        """
        with self._api("count the nodes"):
            response = self.core_v1_client.list_node(limit=1, _preload_content=False, _request_timeout=15)
        listing = json.loads(response.data)
        return len(listing["items"]) + int(listing["metadata"].get("remainingItemCount") or 0)

    def deployment_images(self, namespace: str) -> dict[str, list[str]]:
        """Each deployment's container images in ``namespace`` (empty when it does not exist)."""
        with self._api(f"list the deployments of namespace {namespace}"):
            items = self.apps_v1_client.list_namespaced_deployment(namespace).items
        return {
            d.metadata.name: [c.image for c in d.spec.template.spec.containers]
            for d in sorted(items, key=lambda d: d.metadata.name)
        }

    def deployment_objects(self, namespace: str) -> dict[str, dict[str, Any]]:
        """Each deployment in ``namespace`` as the API serves it (JSON field names), by name."""
        with self._api(f"list the deployments of namespace {namespace}"):
            response = self.apps_v1_client.list_namespaced_deployment(
                namespace, _preload_content=False, _request_timeout=30
            )
        return {item["metadata"]["name"]: item for item in json.loads(response.data)["items"]}

    def deployments(self, namespace: str) -> list[str]:
        """Names of the deployments in ``namespace`` (empty when it does not exist)."""
        with self._api(f"list the deployments of namespace {namespace}"):
            items = self.apps_v1_client.list_namespaced_deployment(namespace).items
        return sorted(d.metadata.name for d in items)


def _ready_with(node: client.V1Node, resource: str) -> bool:
    """Whether the node is Ready and has some of ``resource`` allocatable."""
    status = node.status
    if status is None:
        return False
    ready = any(c.type == "Ready" and c.status == "True" for c in status.conditions or [])
    return ready and str((status.allocatable or {}).get(resource, "0")) not in ("0", "")
