"""The runner node object: registered like a kubelet registers itself, kept alive by a lease."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

log = logging.getLogger(__name__)

RUNNER_NODE_LABEL = "kai-scale.dev/runner-node"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40
HEARTBEAT_SECONDS = 10


def node_body(*, name: str) -> dict[str, Any]:
    """The Node as created: schedulable, no GPUs (workload pods ask for GPUs, so they never land here)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                RUNNER_NODE_LABEL: "true",
            },
        },
        "spec": {},
    }


def node_status(*, name: str, kubelet_port: int, kubelet_version: str, now: datetime) -> dict[str, Any]:
    """The node's status: Ready, loopback address, and the port of our kubelet API (logs)."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"}

    def condition(kind: str, healthy: bool, reason: str) -> dict[str, str]:
        value = "True" if (kind == "Ready") == healthy else "False"
        return {
            "type": kind,
            "status": value,
            "reason": reason,
            "message": reason,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }

    return {
        "status": {
            "capacity": resources,
            "allocatable": resources,
            # Only the loopback IP: a Hostname address would make the API server look up "kai-runner".
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
            "nodeInfo": {
                "kubeletVersion": kubelet_version,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "containerRuntimeVersion": "local://kai-scale-runner-kubelet",
                "osImage": "local processes (kai-scale-pipeline runner kubelet double)",
                "kernelVersion": "",
                "machineID": name,
                "systemUUID": name,
                "bootID": name,
            },
            "conditions": [
                condition("Ready", True, "KubeletReady"),
                condition("MemoryPressure", True, "KubeletHasSufficientMemory"),
                condition("DiskPressure", True, "KubeletHasNoDiskPressure"),
                condition("PIDPressure", True, "KubeletHasSufficientPID"),
            ],
        }
    }


class NodeRegistration:
    """Registers the runner node and renews its lease and Ready condition until stopped."""

    def __init__(
        self,
        *,
        core: client.CoreV1Api,
        coordination: client.CoordinationV1Api,
        name: str,
        kubelet_port: int,
        kubelet_version: str,
    ) -> None:
        self.core = core
        self.coordination = coordination
        self.name = name
        self.kubelet_port = kubelet_port
        self.kubelet_version = kubelet_version
        self.stopped = threading.Event()

    def register(self) -> None:
        """Create the node (or take over an existing one) and report it Ready."""
        body = node_body(name=self.name)
        try:
            self.core.create_node(body)
        except ApiException as error:
            if error.status != 409:
                raise
            self.core.patch_node(self.name, {"metadata": {"labels": body["metadata"]["labels"]}})
        self._report_ready()
        self._renew_lease()

    def _report_ready(self) -> None:
        self.core.patch_node_status(
            self.name,
            node_status(
                name=self.name,
                kubelet_port=self.kubelet_port,
                kubelet_version=self.kubelet_version,
                now=datetime.now(UTC),
            ),
        )

    def _renew_lease(self) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec = {"holderIdentity": self.name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": now}
        try:
            self.coordination.patch_namespaced_lease(self.name, LEASE_NAMESPACE, {"spec": spec})
        except ApiException as error:
            if error.status != 404:
                raise
            node = self.core.read_node(self.name)
            owner = {"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": node.metadata.uid}
            self.coordination.create_namespaced_lease(
                LEASE_NAMESPACE,
                {"metadata": {"name": self.name, "ownerReferences": [owner]}, "spec": spec},
            )

    def heartbeat_forever(self) -> None:
        """Renew the lease and the Ready condition until ``stopped`` is set (a thread target)."""
        while not self.stopped.wait(HEARTBEAT_SECONDS):
            try:
                self._renew_lease()
                self._report_ready()
            except Exception:
                log.exception("runner node heartbeat failed; retrying in %s s", HEARTBEAT_SECONDS)
