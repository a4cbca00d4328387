"""A stand-in for kwok-operator's NodePool controller, for the local environment only.

It reconciles the same ``kwok.sigs.run-ai.com/v1beta1`` NodePool the same way: nodes named
``<pool>-<suffix>``, labelled ``kwok.x-k8s.io/controller=<pool>``, annotated ``kwok.x-k8s.io/node=fake``,
tainted ``kwok.x-k8s.io/node=fake:NoSchedule``, owned by the pool, with the template's ``status``
copied in (as kwok-operator does); scaled to ``spec.nodeCount``; an ``Available`` condition in the
status. The GPUs come from the fake GPU operator, which the pipeline's setup installs. To be replaced
by the real kwok-operator, built from its Go module (which KAI's go.mod pins and the module proxy
serves with ``GONOSUMDB=github.com/run-ai``), installed by the setup from its release manifest.

Run: ``python -m localenv.nodepool_controller --kubeconfig PATH``.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

log = logging.getLogger("nodepool-controller")

GROUP, VERSION, PLURAL = "kwok.sigs.run-ai.com", "v1beta1", "nodepools"
CONTROLLER_LABEL = "kwok.x-k8s.io/controller"
FAKE_KEY = "kwok.x-k8s.io/node"
FINALIZER = "kwok.sigs.k8s.io/finalizer"
# Marks which template a node was made from, so a changed template replaces exactly the stale nodes.
HASH_KEY = "kai-scale.dev/node-template-hash"
RESYNC_SECONDS = 30
WORKERS = 16


def node_for(pool: dict[str, Any]) -> dict[str, Any]:
    """The Node body kwok-operator creates for ``pool`` (plus the template's status, see above)."""
    template = copy.deepcopy(pool["spec"].get("nodeTemplate") or {})
    template_hash = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]
    metadata = template.get("metadata") or {}
    spec = template.get("spec") or {}
    spec["taints"] = [*(spec.get("taints") or []), {"key": FAKE_KEY, "value": "fake", "effect": "NoSchedule"}]
    pool_meta = pool["metadata"]
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "generateName": f"{pool_meta['name']}-",
            "labels": {**(metadata.get("labels") or {}), CONTROLLER_LABEL: pool_meta["name"]},
            "annotations": {**(metadata.get("annotations") or {}), FAKE_KEY: "fake", HASH_KEY: template_hash},
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "NodePool",
                    "name": pool_meta["name"],
                    "uid": pool_meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }
    if template.get("status"):
        body["status"] = template["status"]
    return body


def available_condition(*, status: str, reason: str, message: str, generation: int) -> dict[str, Any]:
    """The NodePool's ``Available`` condition."""
    return {
        "type": "Available",
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


class NodePoolController:
    """Reconciles every NodePool: on each watch event and every ``RESYNC_SECONDS``."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.pool = ThreadPoolExecutor(max_workers=WORKERS)
        self._lock = threading.Lock()

    def reconcile(self, name: str) -> None:
        """Bring the pool's nodes to ``spec.nodeCount`` from its current template."""
        with self._lock:  # one reconcile at a time: events and resyncs may overlap
            try:
                pool = self.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
            except ApiException as error:
                if error.status == 404:
                    return
                raise
            self._reconcile(pool)

    def _reconcile(self, pool: dict[str, Any]) -> None:
        metadata = pool["metadata"]
        name = metadata["name"]
        nodes = self._nodes(name)
        if metadata.get("deletionTimestamp"):
            self._delete(list(nodes))
            finalizers = [f for f in metadata.get("finalizers") or [] if f != FINALIZER]
            self.custom.patch_cluster_custom_object(
                GROUP, VERSION, PLURAL, name, {"metadata": {"finalizers": finalizers}}
            )
            return
        if FINALIZER not in (metadata.get("finalizers") or []):
            finalizers = [*(metadata.get("finalizers") or []), FINALIZER]
            self.custom.patch_cluster_custom_object(
                GROUP, VERSION, PLURAL, name, {"metadata": {"finalizers": finalizers}}
            )
        wanted = int(pool["spec"].get("nodeCount", 0))
        body = node_for(pool)
        stale = [
            node for node, template in nodes.items() if template != body["metadata"]["annotations"][HASH_KEY]
        ]
        if stale:
            log.info("NodePool %s: template changed; replacing %d nodes", name, len(stale))
            self._set_status(pool, "False", "Updating", "Updating the NodePool")
            self._delete(stale)
            nodes = {node: template for node, template in nodes.items() if node not in stale}
        if len(nodes) < wanted:
            self._set_status(pool, "False", "ScalingUp", "Scaling up the NodePool")
            list(
                self.pool.map(
                    lambda _: self.core.create_node(body, _preload_content=False), range(wanted - len(nodes))
                )
            )
        elif len(nodes) > wanted:
            self._set_status(pool, "False", "ScalingDown", "Scaling down the NodePool")
            self._delete(sorted(nodes)[wanted:])
        self._set_status(pool, "True", "Ready", "NodePool is ready")

    def _nodes(self, pool_name: str) -> dict[str, str | None]:
        """The pool's nodes, each with the hash of the template it was made from."""
        # Raw JSON: deserialising thousands of V1Node objects would dominate a reconcile.
        response = self.core.list_node(
            label_selector=f"{CONTROLLER_LABEL}={pool_name}", _preload_content=False
        )
        return {
            item["metadata"]["name"]: (item["metadata"].get("annotations") or {}).get(HASH_KEY)
            for item in json.loads(response.data)["items"]
        }

    def _delete(self, names: list[str]) -> None:
        def delete(name: str) -> None:
            try:
                self.core.delete_node(name)
            except ApiException as error:
                if error.status != 404:
                    raise

        list(self.pool.map(delete, names))

    def _set_status(self, pool: dict[str, Any], status: str, reason: str, message: str) -> None:
        """Write the condition only when it changes: every write is a watch event that reconciles again."""
        generation = pool["metadata"].get("generation", 1)
        current = pool.get("status") or {}
        conditions = current.get("conditions") or []
        previous: dict[str, Any] = next((c for c in conditions if c.get("type") == "Available"), {})
        unchanged = (status, reason, generation)
        if (previous.get("status"), previous.get("reason"), current.get("observedGeneration")) == unchanged:
            return
        condition = available_condition(status=status, reason=reason, message=message, generation=generation)
        body = {"status": {"conditions": [condition], "observedGeneration": generation}}
        pool["status"] = self.custom.patch_cluster_custom_object_status(
            GROUP, VERSION, PLURAL, pool["metadata"]["name"], body
        )["status"]

    def run_forever(self) -> None:
        """Watch NodePools; relist (which also resyncs every pool) when the watch ends or fails."""
        while True:
            try:
                listing = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
                for pool in listing["items"]:
                    self.reconcile(pool["metadata"]["name"])
                stream = watch.Watch().stream(
                    self.custom.list_cluster_custom_object,
                    GROUP,
                    VERSION,
                    PLURAL,
                    resource_version=listing["metadata"]["resourceVersion"],
                    timeout_seconds=RESYNC_SECONDS,
                )
                for event in stream:
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.reconcile(event["object"]["metadata"]["name"])
            except Exception:
                log.exception("reconciling NodePools failed; relisting")
                threading.Event().wait(2)


def main() -> None:
    """Run the controller until killed."""
    parser = argparse.ArgumentParser(description="NodePool controller (kwok-operator stand-in)")
    parser.add_argument("--kubeconfig", type=Path, required=True)
    options = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(options.kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = WORKERS
    log.info("watching %s.%s/%s", PLURAL, GROUP, VERSION)
    NodePoolController(client.ApiClient(configuration)).run_forever()


if __name__ == "__main__":
    main()
