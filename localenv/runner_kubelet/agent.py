"""The runner node's kubelet double: watches the pods bound to the node and runs each as a local process.

It is a test double of a kubelet for the project's own runner image, nothing more: one container per
pod, restartPolicy Never, no volumes, no exec, no probes. See README.md ("The local environment").
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from localenv.runner_images import RunnableImage
from localenv.runner_kubelet.log_server import LogSource
from localenv.runner_kubelet.pod_process import PodContext, PodProcess
from localenv.runner_kubelet.status import lost_pod_status

log = logging.getLogger(__name__)

TOKEN_SECONDS = 48 * 3600
WATCH_SECONDS = 300


class RunnerKubelet:
    """Runs the pods bound to ``node_name`` and confirms their deletion, as a kubelet does."""

    def __init__(
        self,
        *,
        api_client: client.ApiClient,
        node_name: str,
        mapping: tuple[RunnableImage, ...],
        sandbox_root: Path,
        api_server_url: str,
        ca_file: Path,
    ) -> None:
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.node_name = node_name
        self.sandbox_root = sandbox_root
        self.api_server_url = api_server_url
        self.ca_file = ca_file
        self.pods: dict[str, PodProcess] = {}
        self._terminating: set[str] = set()
        self._lock = threading.Lock()
        self.context = PodContext(
            mapping=mapping,
            sandbox_root=sandbox_root,
            executable_path=os.pathsep.join(
                [str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]
            ),
            secrets=self._secret_data,
            config_maps=self._config_map_data,
            issue_credentials=self._issue_credentials,
            write_status=self._write_status,
        )

    def log_source(self, namespace: str, name: str) -> LogSource | None:
        """The log of the pod ``namespace/name`` that this node runs, if any."""
        with self._lock:
            for process in self.pods.values():
                metadata = process.pod["metadata"]
                if (metadata["namespace"], metadata["name"]) == (namespace, name):
                    return LogSource(
                        log=process.log, container=process.container_name, finished=process.finished.is_set
                    )
        return None

    def stop_all(self, *, grace_seconds: float) -> None:
        """Stop every pod's process: the node is going away, and its processes must not outlive it."""
        with self._lock:
            running = list(self.pods.values())
        for process in running:
            process.stop(grace_seconds=grace_seconds)

    def watch_forever(self) -> None:
        """List and watch the node's pods, reconciling each event (restarts the watch when it expires)."""
        selector = f"spec.nodeName={self.node_name}"
        while True:
            try:
                listing = self.core.list_pod_for_all_namespaces(field_selector=selector)
                for pod in listing.items:
                    self._reconcile(self._as_dict(pod), deleted=False)
                stream = watch.Watch().stream(
                    self.core.list_pod_for_all_namespaces,
                    field_selector=selector,
                    resource_version=listing.metadata.resource_version,
                    timeout_seconds=WATCH_SECONDS,
                )
                for event in stream:
                    self._reconcile(self._as_dict(event["object"]), deleted=event["type"] == "DELETED")
            except ApiException as error:
                if error.status != 410:  # 410: the watch expired; relist
                    log.exception("watching the runner node's pods failed; relisting")
            except Exception:
                log.exception("watching the runner node's pods failed; relisting")

    def _as_dict(self, pod: client.V1Pod) -> dict[str, Any]:
        return dict(self.api_client.sanitize_for_serialization(pod))

    def _reconcile(self, pod: dict[str, Any], *, deleted: bool) -> None:
        uid = pod["metadata"]["uid"]
        with self._lock:
            process = self.pods.get(uid)
            terminating = uid in self._terminating
            if (deleted or pod["metadata"].get("deletionTimestamp")) and not terminating:
                self._terminating.add(uid)
        if deleted or pod["metadata"].get("deletionTimestamp"):
            if not terminating:
                threading.Thread(target=self._terminate, args=(pod, process, deleted), daemon=True).start()
            return
        if process is not None:
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Running":
            # Started by an earlier run of this agent whose process is gone: never start it twice.
            self._write_status(pod, lost_pod_status())
        elif phase not in ("Succeeded", "Failed"):
            process = PodProcess(pod=pod, context=self.context)
            with self._lock:
                self.pods[uid] = process
            threading.Thread(target=process.run, name=f"pod-{uid}", daemon=True).start()

    def _terminate(self, pod: dict[str, Any], process: PodProcess | None, deleted: bool) -> None:
        """Stop the pod's process, then confirm the deletion the API server waits for."""
        metadata = pod["metadata"]
        uid = metadata["uid"]
        if process is not None:
            grace = metadata.get("deletionGracePeriodSeconds")
            process.stop(grace_seconds=float(30 if grace is None else grace))
            process.finished.wait(timeout=10)
        if not deleted:
            try:
                self.core.delete_namespaced_pod(
                    metadata["name"],
                    metadata["namespace"],
                    grace_period_seconds=0,
                    body=client.V1DeleteOptions(
                        grace_period_seconds=0, preconditions=client.V1Preconditions(uid=uid)
                    ),
                )
            except ApiException as error:
                if error.status not in (404, 409):
                    log.exception(
                        "confirming the deletion of pod %s/%s failed", metadata["namespace"], metadata["name"]
                    )
        with self._lock:
            self.pods.pop(uid, None)
            self._terminating.discard(uid)
        if process is not None:
            shutil.rmtree(process.sandbox, ignore_errors=True)

    def _write_status(self, pod: dict[str, Any], body: dict[str, Any]) -> None:
        metadata = pod["metadata"]
        try:
            self.core.patch_namespaced_pod_status(metadata["name"], metadata["namespace"], {"status": body})
        except ApiException as error:
            if error.status != 404:  # a pod deleted meanwhile has no status to report
                raise

    def _secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        try:
            secret = self.core.read_namespaced_secret(name, namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return {key: base64.b64decode(value).decode() for key, value in (secret.data or {}).items()}

    def _config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        try:
            config_map = self.core.read_namespaced_config_map(name, namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return dict(config_map.data or {})

    def _issue_credentials(self, pod: dict[str, Any], sandbox: Path) -> dict[str, str]:
        """Mint a token of the pod's ServiceAccount bound to the pod, and a kubeconfig that uses it.

        In a real pod the client finds the token under /var/run/secrets; a local process cannot, so it
        gets KUBECONFIG instead. The permissions are the ServiceAccount's own, so RBAC is exercised.
        """
        metadata, spec = pod["metadata"], pod["spec"]
        account = spec.get("serviceAccountName") or "default"
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(
                audiences=[],
                expiration_seconds=TOKEN_SECONDS,
                bound_object_ref=client.V1BoundObjectReference(
                    api_version="v1", kind="Pod", name=metadata["name"], uid=metadata["uid"]
                ),
            )
        )
        token = self.core.create_namespaced_service_account_token(account, metadata["namespace"], request)
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": self.api_server_url, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": account, "user": {"token": token.status.token}}],
            "contexts": [
                {
                    "name": "pod",
                    "context": {"cluster": "local", "user": account, "namespace": metadata["namespace"]},
                }
            ],
            "current-context": "pod",
        }
        path = sandbox / ".kube" / "config"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(kubeconfig))
        path.chmod(0o600)
        host, port = self.api_server_url.removeprefix("https://").rsplit(":", 1)
        return {"KUBECONFIG": str(path), "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
