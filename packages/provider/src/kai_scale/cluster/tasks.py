"""The setup steps, each defined once in ``SETUP_STEPS``, and the body of the teardown task.

A row of ``SETUP_STEPS`` is a task of the DAG's setup group: its id, what it does in one line (the
task's doc in Airflow's UI) and its body on the deployment's cluster. The DAG's setup tasks, the list
of them in docs/architecture.md and their tests are derived from the table: a step is added by a row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow.sdk import Context

from kai_scale.cluster import installs, inventory, kai_setup, node_pool, runner_access, teardown
from kai_scale.cluster.installs import DeploymentInstalls
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.hooks.helm import HelmHook
from kai_scale.hooks.release_manifests import ReleaseManifestsHook
from kai_scale.params import check_params
from kai_scale.run_id import run_id_of
from kai_scale.settings import PipelineSettings

log = logging.getLogger(__name__)

CHECK_CLUSTER_TASK = "check_cluster"


@dataclass(frozen=True, kw_only=True)
class StepInput:
    """What a setup step reads besides the cluster."""

    settings: PipelineSettings
    """The deployment's settings."""
    params: Mapping[str, Any]
    """The run's params: ``node_count``, ``scenarios``, ``kai_ref``, ``runner_tag``."""
    scenario_names: Sequence[str]
    """Every scenario of the DAG, which ``params`` is checked against."""

    def installs(self) -> DeploymentInstalls:
        """include/manifests/installs.yaml under the deployment's chart values profile."""
        return installs.load_installs(
            self.settings.include_dir, chart_values_profile=self.settings.chart_values_profile
        )


@dataclass(frozen=True, kw_only=True)
class StepResult:
    """What a setup step did."""

    lines: list[str]
    """What it found and did, one log line each."""
    xcom: list[str] | dict[str, Any]
    """What its task returns: the lines, or the inventory (``check_cluster``)."""


@dataclass(frozen=True, kw_only=True)
class SetupStep:
    """One step of the setup: a task of the DAG's setup group, idempotent (a cleared scenario re-runs it)."""

    task_id: str
    """The task's id in the setup group, ``verb_noun``."""
    summary: str
    """What it does, in one line: the task's doc in Airflow's UI and its row in docs/architecture.md."""
    body: Callable[[ClusterHook, StepInput], Sequence[str] | inventory.Inventory]
    """The work on the deployment's cluster: the lines it logs, or the inventory it took."""
    multiple_outputs: bool = False
    """Its task also pushes each key of the dict it returns as an XCom of its own (Airflow's option)."""
    branch: bool = False
    """Its task is a branch: once done, it follows only the selected scenarios' tasks and the teardown."""

    def run(
        self,
        *,
        settings: PipelineSettings,
        params: Mapping[str, Any] | None = None,
        scenario_names: Sequence[str] = (),
    ) -> StepResult:
        """Run the body on the deployment's cluster, log its lines, and close the connections it opened."""
        given = StepInput(settings=settings, params=params or {}, scenario_names=scenario_names)
        with ClusterHook(conn_id=settings.kubernetes_conn_id) as cluster:
            done = self.body(cluster, given)
        if isinstance(done, inventory.Inventory):
            return StepResult(lines=_logged(done.lines()), xcom=done.to_dict())
        return StepResult(lines=_logged(done), xcom=list(done))


def _logged(lines: Sequence[str]) -> list[str]:
    for line in lines:
        log.info("%s", line)
    return list(lines)


def _check_cluster(cluster: ClusterHook, given: StepInput) -> inventory.Inventory:
    # Before the first request: refused params never reach the cluster (the hook connects lazily).
    check_params(given.params, scenario_names=given.scenario_names)
    return inventory.preflight(cluster)


SETUP_STEPS: tuple[SetupStep, ...] = (
    SetupStep(
        task_id=CHECK_CLUSTER_TASK,
        summary="Refuse bad parameters; check the cluster answers and take stock of what is installed.",
        body=_check_cluster,
        multiple_outputs=True,
    ),
    SetupStep(
        task_id="install_kwok",
        summary="KWOK and its stages (pod-complete removed).",
        body=lambda cluster, given: installs.install_kwok(
            cluster,
            releases=ReleaseManifestsHook(),
            installs=given.installs().pins,
            sources=given.settings.source_mirrors,
            placement=given.settings.system_placement,
        ),
    ),
    SetupStep(
        task_id="prepare_runner_access",
        summary="Namespace, ServiceAccount, RBAC and admission policy of the runner pods.",
        body=lambda cluster, given: runner_access.prepare_runner_access(
            cluster, include_dir=given.settings.include_dir, namespace=given.settings.namespace
        ),
    ),
    SetupStep(
        task_id="size_node_pool",
        summary="kwok-operator and managed-nodepool sized for the run.",
        body=lambda cluster, given: node_pool.size_node_pool(
            cluster,
            releases=ReleaseManifestsHook(),
            installs=given.installs().pins,
            sources=given.settings.source_mirrors,
            placement=given.settings.system_placement,
            include_dir=given.settings.include_dir,
            node_count=given.params["node_count"],
        ),
    ),
    SetupStep(
        task_id="install_fake_gpu_operator",
        summary="The fake GPU operator, which reports GPUs on the KWOK nodes.",
        body=lambda cluster, given: installs.install_fake_gpu_operator(
            cluster,
            helm=HelmHook(conn_id=given.settings.kubernetes_conn_id),
            installs=given.installs().pins,
            sources=given.settings.source_mirrors,
            placement=given.settings.system_placement,
        ),
    ),
    SetupStep(
        task_id="install_monitoring",
        summary="kube-prometheus-stack and Pyroscope.",
        body=lambda _, given: installs.install_monitoring(
            helm=HelmHook(conn_id=given.settings.kubernetes_conn_id),
            installs=given.installs(),
            sources=given.settings.source_mirrors,
            placement=given.settings.system_placement,
            skip=given.settings.skip_installs,
        ),
    ),
    SetupStep(
        task_id="install_service_monitors",
        summary="ServiceMonitors for KAI's scheduler, binder and queue controller.",
        body=lambda cluster, given: installs.install_service_monitors(
            cluster, include_dir=given.settings.include_dir
        ),
    ),
    SetupStep(
        task_id="tune_kai",
        summary="KAI tuned by the deployment's tuning profile and rolled out by KAI's operator.",
        body=lambda cluster, given: kai_setup.tune_kai(
            cluster, include_dir=given.settings.include_dir, profile=given.settings.kai_tuning_profile
        ),
    ),
    SetupStep(
        task_id="wait_for_nodes",
        summary="All nodes of the NodePool Ready with GPUs; then only the selected scenarios run.",
        body=lambda cluster, given: node_pool.wait_for_nodes(cluster, node_count=given.params["node_count"]),
        branch=True,
    ),
)


def setup_step(task_id: str) -> SetupStep:
    """The step of ``SETUP_STEPS`` with this task id."""
    for step in SETUP_STEPS:
        if step.task_id == task_id:
            return step
    raise KeyError(f"no setup step {task_id!r}; the steps are {', '.join(s.task_id for s in SETUP_STEPS)}")


def tear_down_environment(*, settings: PipelineSettings, setup_group: str, context: Context) -> list[str]:
    """Remove what the run created and scale the NodePool back; runs after failures too."""
    # Pulled, not passed: a failed preflight leaves no inventory, and teardown must still run.
    inventory = context["ti"].xcom_pull(task_ids=f"{setup_group}.{CHECK_CLUSTER_TASK}")
    existing = inventory.get("existing") if inventory else None
    run_id = run_id_of(context["dag_run"])
    with ClusterHook(conn_id=settings.kubernetes_conn_id) as cluster:
        return _logged(teardown.teardown(cluster, run_id=run_id, existing=existing))
