"""The preflight: the cluster answers, and what is installed in it when the run starts."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kai_scale.cluster.installs import SERVICE_MONITOR_CRD, STAGE_CRD
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.hooks.helm import helm_available
from kai_scale_model import kai
from kai_scale_model.node_pool import NODEPOOL, NODEPOOL_CRD

# Cluster-scoped objects KAI's suite creates without a label of its own and, when a spec fails, leaves
# behind; teardown removes the ones that did not exist when the run started. (Its namespaces and
# priority classes carry app=engine-e2e and are removed by that label.)
SNAPSHOT_KINDS: tuple[tuple[str, str], ...] = (
    ("scheduling.run.ai/v2", "Queue"),
    ("kai.scheduler/v1alpha1", "Topology"),
    NODEPOOL,
    ("kwok.x-k8s.io/v1alpha1", "Stage"),
)


@dataclass(frozen=True, kw_only=True)
class Inventory:
    """What the preflight found in the cluster."""

    server_version: str
    """The API server's version."""
    kai_installed: bool
    """KAI's Queue CRD exists."""
    kai_deployments: tuple[str, ...]
    """Deployments in KAI's namespace (``kai_scale_model.kai.NAMESPACE``)."""
    kwok_installed: bool
    """KWOK's Stage CRD exists."""
    nodepool_crd: bool
    """kwok-operator's NodePool CRD exists."""
    prometheus_operator: bool
    """The ServiceMonitor CRD exists."""
    helm_on_worker: bool
    """helm is on the worker's PATH."""
    existing: dict[str, list[str]]
    """Names of the SNAPSHOT_KINDS objects at the start of the run, by kind."""

    def lines(self) -> list[str]:
        """A readable summary for the task log."""
        return [
            f"API server {self.server_version}",
            f"KAI: {'installed' if self.kai_installed else 'not installed'}"
            + (f" (deployments: {', '.join(self.kai_deployments)})" if self.kai_deployments else ""),
            f"KWOK: {'installed' if self.kwok_installed else 'not installed'}",
            f"kwok-operator NodePool CRD: {'installed' if self.nodepool_crd else 'not installed'}",
            f"Prometheus operator: {'installed' if self.prometheus_operator else 'not installed'}",
            f"helm on the worker: {'yes' if self.helm_on_worker else 'no'}",
        ]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, for XCom."""
        return asdict(self)


def kind_key(api_version: str, kind: str) -> str:
    """The key of a SNAPSHOT_KINDS kind in ``Inventory.existing``."""
    return f"{kind}.{api_version}"


def preflight(cluster: ClusterHook) -> Inventory:
    """Check the cluster answers, and take stock of what is installed."""
    version = cluster.server_version()
    kai_installed = cluster.crd_exists(kai.QUEUE_CRD)
    existing = {}
    for api_version, kind in SNAPSHOT_KINDS:
        existing[kind_key(api_version, kind)] = cluster.names(api_version=api_version, kind=kind)
    return Inventory(
        server_version=version,
        kai_installed=kai_installed,
        kai_deployments=tuple(cluster.deployments(kai.NAMESPACE)) if kai_installed else (),
        kwok_installed=cluster.crd_exists(STAGE_CRD),
        nodepool_crd=cluster.crd_exists(NODEPOOL_CRD),
        prometheus_operator=cluster.crd_exists(SERVICE_MONITOR_CRD),
        helm_on_worker=helm_available(),
        existing=existing,
    )
