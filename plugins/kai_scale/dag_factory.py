"""Builds the nightly DAG: setup tasks, one runner pod per scenario, metrics, publishing, teardown.

Scenarios run one at a time (``max_active_tasks=1``: they share and measure one cluster) as siblings,
so a failed scenario never blocks another, and clearing one scenario re-runs only it, its setup
(cleared with it by Airflow) and what comes after it: metrics, publishing and the teardown.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Param, TriggerRule, XComArg, chain, task
from airflow.sdk.definitions.taskgroup import TaskGroup

from kai_scale import cluster_setup
from kai_scale.hooks.cluster import ClusterHook, ClusterUnreachable
from kai_scale.hooks.results_store import ResultsStore
from kai_scale.metrics.collection import Window, missing_scenarios, scenario_window, unwritten_metrics
from kai_scale.metrics.profile import MetricsProfile, load_profile
from kai_scale.metrics.prometheus import client_from_connection
from kai_scale.metrics.run_metrics import collect_run_metrics
from kai_scale.operators.scenario_pod import (
    OUTPUTS_XCOM_KEY,
    WINDOW_XCOM_KEY,
    ScenarioPodOperator,
    scenario_task_id,
)
from kai_scale.output_keys import published_keys, run_metrics_key, run_summary_key
from kai_scale.params import check_params, param_schema
from kai_scale.publishing.publisher import publish_run
from kai_scale.publishing.results_document import (
    RunMetadata,
    commit_hash,
    ginkgo_focus,
    manifest_entry,
    results_document,
    service_resources,
    timestamp,
)
from kai_scale.run_id import pipeline_run_id
from kai_scale.run_summary import run_summary, scenario_entry
from kai_scale.scenarios.model import Scenario
from kai_scale.settings import PipelineSettings

DEFAULT_SCHEDULE = "@daily"
SETUP_RETRIES = 2
TAGS = ["kai-scheduler", "scale-test", "kwok"]
SETUP_GROUP = "setup"
SUMMARY_XCOM_KEY = "summary"


METRICS_PROFILE = "metrics/default.yaml"


class RunFailedError(RuntimeError):
    """A scenario failed, or metrics or a report are missing; raised after the run is published."""


class MetricsMissingError(RuntimeError):
    """Some metrics could not be collected; raised after the metrics document marks them missing."""


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
    profile = load_profile(settings.include_dir / METRICS_PROFILE)
    for scenario in scenarios:
        # At parse time, so a clash is an import error rather than a crash of collect_metrics.
        profile.with_additions(
            scenario.metrics, owner=f"scenario file {settings.include_dir}/scenarios/{scenario.name}.yaml"
        )
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
        # One retry, which only a lost worker uses: it reattaches to the running pod (see the operator).
        scenario_tasks = [ScenarioPodOperator(scenario=s, settings=settings, retries=1) for s in scenarios]
        metrics = _metrics_task(settings=settings, scenarios=scenarios, profile=profile)
        publish = _publish_task(settings=settings, scenarios=scenarios, cluster=cluster)
        teardown = _teardown_task(cluster=cluster)
        setups[-1] >> scenario_tasks >> metrics >> publish >> teardown
        teardown.as_teardown(setups=setups)  # type: ignore[arg-type]  # XComArgs are accepted at run time
        # A teardown is skipped when no setup succeeded (all_done_setup_success); ours must run even
        # then, so an unreachable cluster or refused params still end with it and its log.
        for operator, _ in teardown.iter_references():
            operator.trigger_rule = TriggerRule.ALL_DONE
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


def _scenario_outputs(ti: Any, store: ResultsStore, name: str) -> tuple[dict[str, Any] | None, str | None]:
    """What a scenario's task recorded (its latest try's output keys) and the result.json its runner wrote."""
    outputs = ti.xcom_pull(task_ids=scenario_task_id(name), key=OUTPUTS_XCOM_KEY)
    return outputs, store.read_text(outputs["keys"]["result"]) if outputs else None


def _window(ti: Any, name: str, result_text: str | None) -> Window | None:
    try:
        outcome = json.loads(result_text) if result_text else None
    except json.JSONDecodeError:
        outcome = None  # a truncated result.json: the task's own window still holds
    task_window = ti.xcom_pull(task_ids=scenario_task_id(name), key=WINDOW_XCOM_KEY)
    return scenario_window(outcome=outcome if isinstance(outcome, dict) else None, task_window=task_window)


def _metrics_task(
    *, settings: PipelineSettings, scenarios: Sequence[Scenario], profile: MetricsProfile
) -> XComArg:
    # No retries: the client retries connecting; re-collecting is a clear of this task.
    @task(trigger_rule="all_done", retries=0)
    def collect_metrics(**context: Any) -> str:
        """Each selected scenario's metrics over its own window, to runs/<run-id>/metrics.json."""
        ti = context["ti"]
        run_id = _run_id(context)
        store = ResultsStore(aws_conn_id=settings.aws_conn_id, bucket=settings.results_bucket)
        key = run_metrics_key(run_id)
        selected = [s for s in scenarios if s.name in context["params"]["scenarios"]]
        with store.errors_named(f"read the scenarios' results and clear {key}"):
            # An earlier try's metrics must not be published as this try's if this one dies unwritten.
            store.delete(key)
            windows = {s.name: _window(ti, s.name, _scenario_outputs(ti, store, s.name)[1]) for s in selected}
        document = collect_run_metrics(
            run_id=run_id,
            profile=profile,
            scenarios=selected,
            windows=windows,
            connect=lambda: client_from_connection(settings.prometheus_conn_id),
        )
        with store.errors_named(f"write {key}"):
            store.write_text(key=key, text=json.dumps(document))
        for name, entry in document["scenarios"].items():
            print(f"{name}: metrics {entry['status']}" + (f" ({entry['reason']})" if entry["reason"] else ""))
        missing = missing_scenarios(document)
        if missing:
            reasons = "; ".join(f"{name}: {document['scenarios'][name]['reason']}" for name in missing)
            # Written first: the run is published with these metrics marked missing.
            raise MetricsMissingError(f"metrics missing (written to {key}, marked missing): {reasons}")
        return key

    return collect_metrics()


def _publish_task(
    *, settings: PipelineSettings, scenarios: Sequence[Scenario], cluster: ClusterHook
) -> XComArg:
    names = [s.name for s in scenarios]

    # No retries: a failed scenario fails it on purpose; S3 errors are retried by the client.
    @task(trigger_rule="all_done", retries=0)
    def publish_results(**context: Any) -> dict[str, Any]:
        """Publish the run: results.json, report.json, metrics.json, then its manifest entry."""
        ti, params, dag_run = context["ti"], context["params"], context["dag_run"]
        store = ResultsStore(aws_conn_id=settings.aws_conn_id, bucket=settings.results_bucket)
        run_id = _run_id(context)
        entries = []
        with store.errors_named(f"read the outputs of run {run_id} and write its summary"):
            for name in names:
                outputs, result_text = _scenario_outputs(ti, store, name)
                entry = scenario_entry(
                    scenario=name,
                    selected=name in params["scenarios"],
                    outputs=outputs,
                    result_text=result_text,
                    report_exists=outputs is not None and store.exists(outputs["keys"]["report"]),
                )
                print(f"{name}: {entry.status}" + (f" ({entry.reason})" if entry.reason else ""))
                entries.append(entry)
            summary = run_summary(run_id=run_id, params=params, entries=entries)
            store.write_text(key=run_summary_key(run_id), text=json.dumps(summary, indent=2))
            metrics_text = store.read_text(run_metrics_key(run_id))
        ti.xcom_push(key=SUMMARY_XCOM_KEY, value=summary)

        metadata = RunMetadata(
            kai_scheduler_ref=params["kai_ref"],
            kai_commit_hash=commit_hash(entries),
            kwok_node_count=params["node_count"],
            cluster_node_count=_cluster_node_count(cluster),
            test_focus=ginkgo_focus(scenarios, params["scenarios"]),
            timestamp=timestamp(dag_run.run_after),
            service_resources=service_resources(cluster_setup.load_kai_tuning(settings.include_dir)),
        )
        if metrics_text is None:
            metrics_text = json.dumps(
                unwritten_metrics(
                    run_id=run_id, scenarios=[s for s in scenarios if s.name in params["scenarios"]]
                )
            )
        published = publish_run(
            store,
            prefix=settings.results_prefix,
            run_id=run_id,
            results=results_document(metadata=metadata, entries=entries),
            metrics_text=metrics_text,
            report_keys={e.scenario: e.report_key for e in entries},
            entry=manifest_entry(
                run_id=run_id,
                results_key=published_keys(prefix=settings.results_prefix, run_id=run_id).results,
                metadata=metadata,
                status=summary["status"],
                airflow_run_id=dag_run.run_id,
            ),
        )
        where = f"s3://{settings.results_bucket}/{published.keys.results}"
        print(f"published {where} (+ report.json, metrics.json) and its entry in {published.manifest_key}")
        problems = [
            f"{e.scenario}: {e.reason}" for e in entries if e.status == "failure"
        ] + published.problems
        missing = missing_scenarios(json.loads(metrics_text))
        if missing:
            problems.append(f"metrics missing for {', '.join(missing)} (see collect_metrics)")
        if problems:
            # Published first, then failed: the run shows as failed, and its results are complete.
            raise RunFailedError(f"run published to {where}, with problems: " + "; ".join(problems))
        return summary

    return publish_results()


def _cluster_node_count(cluster: ClusterHook) -> int | None:
    # Results are never held hostage by the cluster: unreachable means unknown.
    try:
        return cluster.node_count()
    except ClusterUnreachable as error:
        print(f"cluster_node_count unknown: {error}")
        return None


def _teardown_task(*, cluster: ClusterHook) -> XComArg:
    @task(retries=SETUP_RETRIES)
    def tear_down_environment(**context: Any) -> list[str]:
        """Remove what the run created and scale the NodePool back; runs after failures too."""
        # Pulled, not passed: a failed preflight leaves no inventory, and teardown must still run.
        inventory = context["ti"].xcom_pull(task_ids=f"{SETUP_GROUP}.check_cluster")
        existing = inventory.get("existing") if inventory else None
        return _log(cluster_setup.teardown(cluster, run_id=_run_id(context), existing=existing))

    return tear_down_environment()
