"""Builds the nightly DAG: setup tasks, one runner pod per scenario, metrics, publishing, teardown.

Wiring only: each task's body lives with its concern (``cluster.tasks``, ``metrics.task``,
``publishing.task``), and the setup group is a task per row of ``cluster.tasks.SETUP_STEPS``. Scenarios
run one at a time (``max_active_tasks=1``: they share and measure one cluster) as siblings, so a failed
scenario never blocks another, and clearing one scenario re-runs only it, its setup (cleared with it by
Airflow) and what comes after it: metrics, publishing and the teardown.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Param, TriggerRule, XComArg, chain, get_current_context, task
from airflow.sdk.definitions.taskgroup import TaskGroup

from kai_scale.alerts.wiring import alert_wiring
from kai_scale.cluster import tasks as cluster_tasks
from kai_scale.cluster.installs import load_installs
from kai_scale.cluster.kai_tuning import load_profile as load_tuning_profile
from kai_scale.metrics import task as metrics_task
from kai_scale.metrics.profile import MetricsProfile, load_profile
from kai_scale.operators.scenario_pod import ScenarioPodOperator, scenario_task_id
from kai_scale.params import param_schema
from kai_scale.publishing import task as publishing_task
from kai_scale.publishing.xcom import PUBLISH_TASK_ID
from kai_scale.settings import PipelineSettings
from kai_scale_model.scenario import Scenario

DEFAULT_SCHEDULE = "@daily"
SETUP_RETRIES = 2
TAGS = ["kai-scheduler", "scale-test", "kwok"]
SETUP_GROUP = "setup"
TEARDOWN_TASK_ID = "tear_down_environment"
TEARDOWN_CHECK_TASK_ID = "check_teardown"
METRICS_PROFILE = "metrics/default.yaml"


def _schedule(explicit: str | None) -> str | None:
    """The given schedule, else ``KAI_SCALE_SCHEDULE`` (a cron or preset; ``none`` for manual runs only)."""
    value = explicit or os.environ.get("KAI_SCALE_SCHEDULE", DEFAULT_SCHEDULE)
    return None if value.strip().lower() == "none" else value


def _checked_profile(settings: PipelineSettings, scenarios: Sequence[Scenario]) -> MetricsProfile:
    profile = load_profile(settings.include_dir / METRICS_PROFILE)
    for scenario in scenarios:
        # At parse time, so a clash is an import error rather than a crash of collect_metrics.
        profile.with_additions(
            scenario.metrics, owner=f"scenario file {settings.include_dir}/scenarios/{scenario.name}.yaml"
        )
    return profile


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
    profile = _checked_profile(settings, scenarios)
    # At parse time, so a broken profile is an import error of the DAG file, not a failed setup task.
    load_tuning_profile(settings.include_dir, settings.kai_tuning_profile)
    load_installs(settings.include_dir, chart_values_profile=settings.chart_values_profile)
    schema = param_schema(scenario_names=names, enabled=[s.name for s in scenarios if s.enabled])
    alerts = alert_wiring(settings)

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
            **alerts.default_args,
        },
        **alerts.dag_arguments,
    ) as dag:
        with TaskGroup(SETUP_GROUP, tooltip="prepare the cluster; idempotent, re-run by a retried scenario"):
            setups = [_setup_task(step, settings=settings, names=names) for step in cluster_tasks.SETUP_STEPS]
            chain(*setups)
        # One retry, which only a lost worker uses: it reattaches to the running pod (see the operator).
        # A fixed order (the scenarios' order, by name) without dependencies between them, which
        # would make a cleared scenario clear the ones after it: one slot, highest priority first.
        scenario_tasks = [
            ScenarioPodOperator(
                scenario=s,
                settings=settings,
                retries=1,
                priority_weight=len(scenarios) - index,
                weight_rule="absolute",
            )
            for index, s in enumerate(scenarios)
        ]

        # No retries: the client retries connecting; re-collecting is a clear of this task.
        @task(trigger_rule=TriggerRule.ALL_DONE, retries=0)
        def collect_metrics() -> str:
            """Each selected scenario's metrics and KAI's profiles over its window, under runs/<run-id>/."""
            return metrics_task.collect_metrics(
                settings=settings, scenarios=scenarios, profile=profile, context=get_current_context()
            )

        # No retries: a failed scenario fails it on purpose; S3 errors are retried by the client.
        @task(task_id=PUBLISH_TASK_ID, trigger_rule=TriggerRule.ALL_DONE, retries=0)
        def publish_results() -> dict[str, Any]:
            """Publish the run: results.json, ginkgo-report.json, metrics.json, then its manifest entry."""
            context = get_current_context()
            summary = publishing_task.publish_results(settings=settings, scenarios=scenarios, context=context)
            return summary.model_dump(mode="json")  # its return value: the run summary as written

        @task(task_id=TEARDOWN_TASK_ID, retries=SETUP_RETRIES)
        def tear_down_environment() -> list[str]:
            """Remove what the run created and scale the NodePool back; runs after failures too."""
            return cluster_tasks.tear_down_environment(
                settings=settings, setup_group=SETUP_GROUP, context=get_current_context()
            )

        @task(task_id=TEARDOWN_CHECK_TASK_ID, trigger_rule=TriggerRule.ALL_DONE, retries=0)
        def check_teardown() -> None:
            """Fail the run when the teardown failed: what it could not remove would meet the next night.

            Airflow leaves a teardown out of the run's state; its on_failure_fail_dagrun would make the
            teardown the run's only leaf, so a failed publish_results would no longer fail the run.
            """
            if get_current_context()["ti"].xcom_pull(task_ids=TEARDOWN_TASK_ID) is None:
                raise RuntimeError(f"{TEARDOWN_TASK_ID} failed: see its log; the run is not clean")

        teardown = tear_down_environment()
        setups[-1] >> scenario_tasks >> collect_metrics() >> publish_results() >> teardown
        teardown >> check_teardown()
        teardown.as_teardown(setups=setups)  # type: ignore[arg-type]  # XComArgs are accepted at run time
        # A teardown is skipped when no setup succeeded (all_done_setup_success); ours must run even
        # then, so an unreachable cluster or refused params still end with it and its log.
        for operator, _ in teardown.iter_references():
            operator.trigger_rule = TriggerRule.ALL_DONE
    return dag


def _setup_task(
    step: cluster_tasks.SetupStep, *, settings: PipelineSettings, names: Sequence[str]
) -> XComArg:
    """A setup step as a task of its own, so the UI shows where a setup failed."""
    # A branch, so the scenarios not selected are skipped by it, without a worker pod each.
    decorator = task.branch if step.branch else task

    @decorator(task_id=step.task_id, doc_md=step.summary, multiple_outputs=step.multiple_outputs)
    def run_setup_step() -> list[str] | dict[str, Any]:
        params = get_current_context()["params"]
        done = step.run(settings=settings, params=params, scenario_names=names)
        if not step.branch:
            return done.xcom
        selected = [scenario_task_id(name) for name in names if name in params["scenarios"]]
        # The teardown hangs off every setup task: with no scenario to follow, the branch would skip it.
        return [*selected, TEARDOWN_TASK_ID]

    return run_setup_step()
