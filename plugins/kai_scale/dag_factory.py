"""Builds the nightly DAG: setup tasks, one runner pod per scenario, the run's summary, teardown.

Scenarios run one at a time (``max_active_tasks=1``: they share and measure one cluster) as siblings,
so a failed scenario never blocks another, and clearing one scenario re-runs only it, its setup
(cleared with it by Airflow) and what comes after it: the summary and the teardown.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Param, XComArg, chain, task
from airflow.sdk.definitions.taskgroup import TaskGroup

from kai_scale import cluster_setup
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.hooks.results_store import ResultsStore
from kai_scale.operators.scenario_pod import OUTPUTS_XCOM_KEY, ScenarioPodOperator, scenario_task_id
from kai_scale.output_keys import run_summary_key
from kai_scale.params import check_params, param_schema
from kai_scale.run_id import pipeline_run_id
from kai_scale.run_summary import run_summary, scenario_entry
from kai_scale.scenarios.model import Scenario
from kai_scale.settings import PipelineSettings

DEFAULT_SCHEDULE = "@daily"
SETUP_RETRIES = 2
TAGS = ["kai-scheduler", "scale-test", "kwok"]
SETUP_GROUP = "setup"
SUMMARY_XCOM_KEY = "summary"


class RunFailedError(RuntimeError):
    """At least one scenario failed; raised after the run's summary is written."""


def _schedule(explicit: str | None) -> str | None:
    """The given schedule, else ``KAI_SCALE_SCHEDULE`` (a cron or preset; ``none`` for manual runs only)."""
    value = explicit or os.environ.get("KAI_SCALE_SCHEDULE", DEFAULT_SCHEDULE)
    return None if value.strip().lower() == "none" else value


def _log(lines: Sequence[str]) -> list[str]:
    for line in lines:
        print(line)
    return list(lines)


def _run_id(context: dict[str, Any]) -> str:
    dag_run = context["dag_run"]
    return pipeline_run_id(airflow_run_id=dag_run.run_id, run_after=dag_run.run_after)


def build_nightly_dag(
    *,
    dag_id: str,
    scenarios: Sequence[Scenario],
    doc_md: str,
    settings: PipelineSettings,
    schedule: str | None = None,
) -> DAG:
    """The nightly scale-test DAG for ``scenarios``."""
    names = [s.name for s in scenarios]
    schema = param_schema(scenario_names=names, enabled=[s.name for s in scenarios if s.enabled])
    cluster = ClusterHook(conn_id=settings.kubernetes_conn_id)

    with DAG(
        dag_id=dag_id,
        schedule=_schedule(schedule),
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        max_active_tasks=1,
        params={name: Param(**spec) for name, spec in schema.items()},
        tags=TAGS,
        doc_md=doc_md,
        default_args={
            "retries": SETUP_RETRIES,
            "retry_delay": timedelta(seconds=settings.retry_delay_seconds),
        },
    ) as dag:
        with TaskGroup(SETUP_GROUP, tooltip="prepare the cluster; idempotent, re-run by a retried scenario"):
            setups = _setup_tasks(cluster=cluster, settings=settings, names=names)
            chain(*setups)
        scenario_tasks = [ScenarioPodOperator(scenario=s, settings=settings, retries=0) for s in scenarios]
        summary = _summary_task(settings=settings, names=names)
        teardown = _teardown_task(cluster=cluster)
        setups[-1] >> scenario_tasks >> summary >> teardown
        teardown.as_teardown(setups=setups)  # type: ignore[arg-type]  # XComArgs are accepted at run time
    return dag


def _setup_tasks(*, cluster: ClusterHook, settings: PipelineSettings, names: Sequence[str]) -> list[XComArg]:
    """The setup steps, each its own task so the UI shows where a setup failed."""
    include_dir = settings.include_dir

    def installs() -> dict[str, Any]:
        return cluster_setup.load_installs(include_dir)

    @task
    def check_cluster(**context: Any) -> dict[str, Any]:
        """Refuse bad parameters; check the cluster answers and take stock of what is installed."""
        check_params(context["params"], scenario_names=names)
        inventory = cluster_setup.preflight(cluster)
        _log(inventory.lines())
        return inventory.to_dict()

    @task
    def install_kwok() -> list[str]:
        """KWOK and its stages (pod-complete removed)."""
        return _log(cluster_setup.install_kwok(cluster, installs=installs()))

    @task
    def prepare_runner_access() -> list[str]:
        """Namespace, ServiceAccount and RBAC of the runner pods."""
        return _log(cluster_setup.prepare_runner_access(cluster, include_dir=include_dir))

    @task
    def size_node_pool(**context: Any) -> list[str]:
        """kwok-operator and managed-nodepool sized for the run."""
        node_count = context["params"]["node_count"]
        return _log(
            cluster_setup.size_node_pool(
                cluster, installs=installs(), include_dir=include_dir, node_count=node_count
            )
        )

    @task
    def install_fake_gpu_operator() -> list[str]:
        """The fake GPU operator, which reports GPUs on the KWOK nodes."""
        return _log(
            cluster_setup.install_fake_gpu_operator(cluster, installs=installs(), include_dir=include_dir)
        )

    @task
    def install_monitoring() -> list[str]:
        """kube-prometheus-stack and Pyroscope."""
        return _log(cluster_setup.install_monitoring(cluster, installs=installs()))

    @task
    def install_service_monitors() -> list[str]:
        """ServiceMonitors for KAI's scheduler and binder."""
        return _log(cluster_setup.install_service_monitors(cluster, include_dir=include_dir))

    @task
    def tune_kai() -> list[str]:
        """KAI tuned for scale: consolidation off, high binder concurrency, service resources."""
        return _log(cluster_setup.tune_kai(cluster, include_dir=include_dir))

    @task
    def wait_for_nodes(**context: Any) -> list[str]:
        """All nodes of the NodePool Ready with GPUs."""
        return _log(cluster_setup.wait_for_nodes(cluster, node_count=context["params"]["node_count"]))

    return [
        check_cluster(),
        install_kwok(),
        prepare_runner_access(),
        size_node_pool(),
        install_fake_gpu_operator(),
        install_monitoring(),
        install_service_monitors(),
        tune_kai(),
        wait_for_nodes(),
    ]


def _summary_task(*, settings: PipelineSettings, names: Sequence[str]) -> XComArg:
    # No retries: a failed scenario fails it on purpose; S3 errors are retried by the client.
    @task(trigger_rule="all_done", retries=0)
    def summarize_run(**context: Any) -> dict[str, Any]:
        """Each selected scenario's outcome, from its latest try, written to runs/<run-id>/summary.json."""
        ti = context["ti"]
        params = context["params"]
        store = ResultsStore(aws_conn_id=settings.aws_conn_id, bucket=settings.results_bucket)
        entries = []
        for name in names:
            outputs = ti.xcom_pull(task_ids=scenario_task_id(name), key=OUTPUTS_XCOM_KEY)
            result_text = store.read_text(outputs["keys"]["result"]) if outputs else None
            entry = scenario_entry(
                scenario=name,
                selected=name in params["scenarios"],
                outputs=outputs,
                result_text=result_text,
                report_exists=bool(outputs) and store.exists(outputs["keys"]["report"]),
            )
            print(f"{name}: {entry.status}" + (f" ({entry.reason})" if entry.reason else ""))
            entries.append(entry)
        run_id = _run_id(context)
        summary = run_summary(run_id=run_id, params=params, entries=entries)
        store.write_text(key=run_summary_key(run_id), text=json.dumps(summary, indent=2))
        ti.xcom_push(key=SUMMARY_XCOM_KEY, value=summary)
        failed = [e for e in entries if e.status == "failure"]
        if failed:
            # Written first, then failed: the run shows as failed, and its summary is complete.
            details = "; ".join(f"{e.scenario}: {e.reason}" for e in failed)
            raise RunFailedError(
                f"{len(failed)} scenario(s) failed (summary: {run_summary_key(run_id)}): {details}"
            )
        return summary

    return summarize_run()


def _teardown_task(*, cluster: ClusterHook) -> XComArg:
    @task(retries=SETUP_RETRIES)
    def tear_down_environment(**context: Any) -> list[str]:
        """Remove what the run created and scale the NodePool back; runs after failures too."""
        # Pulled, not passed: a failed preflight leaves no inventory, and teardown must still run.
        inventory = context["ti"].xcom_pull(task_ids=f"{SETUP_GROUP}.check_cluster")
        existing = inventory.get("existing") if inventory else None
        return _log(cluster_setup.teardown(cluster, run_id=_run_id(context), existing=existing))

    return tear_down_environment()
