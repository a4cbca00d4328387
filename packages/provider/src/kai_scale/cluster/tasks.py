"""The bodies of the setup and teardown tasks: each reads its parameters and logs what it found and did."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from kai_scale.cluster import kai_setup, setup
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.params import check_params
from kai_scale.run_id import run_id_of
from kai_scale.settings import PipelineSettings

log = logging.getLogger(__name__)

CHECK_CLUSTER_TASK = "check_cluster"


def _logged(lines: Sequence[str]) -> list[str]:
    for line in lines:
        log.info("%s", line)
    return list(lines)


def _on_cluster(settings: PipelineSettings, step: Callable[[ClusterHook], Sequence[str]]) -> list[str]:
    """Run ``step`` on the deployment's cluster, log its lines and close the connections it opened."""
    with ClusterHook(conn_id=settings.kubernetes_conn_id) as cluster:
        return _logged(step(cluster))


def _installs(settings: PipelineSettings) -> dict[str, Any]:
    return setup.load_installs(settings.include_dir, chart_values_profile=settings.chart_values_profile)


def check_cluster(
    *, settings: PipelineSettings, scenario_names: Sequence[str], params: Any
) -> dict[str, Any]:
    """Refuse bad parameters; check the cluster answers and take stock of what is installed."""
    check_params(params, scenario_names=scenario_names)
    with ClusterHook(conn_id=settings.kubernetes_conn_id) as cluster:
        inventory = setup.preflight(cluster)
    _logged(inventory.lines())
    return inventory.to_dict()


def install_kwok(*, settings: PipelineSettings) -> list[str]:
    """KWOK and its stages (pod-complete removed)."""
    return _on_cluster(
        settings,
        lambda cluster: setup.install_kwok(
            cluster,
            installs=_installs(settings),
            sources=settings.source_mirrors,
            placement=settings.system_placement,
        ),
    )


def prepare_runner_access(*, settings: PipelineSettings) -> list[str]:
    """Namespace, ServiceAccount, RBAC and admission policy of the runner pods."""
    return _on_cluster(
        settings,
        lambda cluster: setup.prepare_runner_access(
            cluster, include_dir=settings.include_dir, namespace=settings.namespace
        ),
    )


def size_node_pool(*, settings: PipelineSettings, params: Any) -> list[str]:
    """kwok-operator and managed-nodepool sized for the run."""
    return _on_cluster(
        settings,
        lambda cluster: setup.size_node_pool(
            cluster,
            installs=_installs(settings),
            sources=settings.source_mirrors,
            placement=settings.system_placement,
            include_dir=settings.include_dir,
            node_count=params["node_count"],
        ),
    )


def install_fake_gpu_operator(*, settings: PipelineSettings) -> list[str]:
    """The fake GPU operator, which gives the KWOK nodes their GPUs."""
    return _on_cluster(
        settings,
        lambda cluster: setup.install_fake_gpu_operator(
            cluster,
            installs=_installs(settings),
            sources=settings.source_mirrors,
            placement=settings.system_placement,
        ),
    )


def install_monitoring(*, settings: PipelineSettings) -> list[str]:
    """kube-prometheus-stack and Pyroscope."""
    return _on_cluster(
        settings,
        lambda cluster: setup.install_monitoring(
            cluster,
            installs=_installs(settings),
            sources=settings.source_mirrors,
            placement=settings.system_placement,
            skip=settings.skip_installs,
        ),
    )


def install_service_monitors(*, settings: PipelineSettings) -> list[str]:
    """ServiceMonitors for KAI's scheduler, binder and queue controller."""
    return _on_cluster(
        settings, lambda cluster: setup.install_service_monitors(cluster, include_dir=settings.include_dir)
    )


def tune_kai(*, settings: PipelineSettings) -> list[str]:
    """KAI tuned by the deployment's tuning profile, and rolled out by KAI's operator."""
    return _on_cluster(
        settings,
        lambda cluster: kai_setup.tune_kai(
            cluster, include_dir=settings.include_dir, profile=settings.kai_tuning_profile
        ),
    )


def wait_for_nodes(*, settings: PipelineSettings, params: Any) -> list[str]:
    """All nodes of the NodePool Ready with GPUs."""
    return _on_cluster(
        settings, lambda cluster: setup.wait_for_nodes(cluster, node_count=params["node_count"])
    )


def tear_down_environment(*, settings: PipelineSettings, setup_group: str, context: Any) -> list[str]:
    """Remove what the run created and scale the NodePool back; runs after failures too."""
    # Pulled, not passed: a failed preflight leaves no inventory, and teardown must still run.
    inventory = context["ti"].xcom_pull(task_ids=f"{setup_group}.{CHECK_CLUSTER_TASK}")
    existing = inventory.get("existing") if inventory else None
    run_id = run_id_of(context["dag_run"])
    return _on_cluster(settings, lambda cluster: setup.teardown(cluster, run_id=run_id, existing=existing))
