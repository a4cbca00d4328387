"""The body of the ``collect_metrics`` task: each selected scenario's metrics and profiles over its window."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from airflow.sdk import Context
from airflow.sdk.types import RuntimeTaskInstanceProtocol

from kai_scale.hooks.prometheus import PrometheusHook
from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.metrics.collection import Window, missing_scenarios, scenario_window
from kai_scale.metrics.profile import MetricsProfile
from kai_scale.metrics.run_metrics import collect_run_metrics
from kai_scale.object_keys import run_metrics_key, run_profiles_key
from kai_scale.operators.scenario_pod import recorded_outputs, recorded_window
from kai_scale.profiles.task import collect_profiles
from kai_scale.run_id import run_id_of
from kai_scale.settings import PipelineSettings
from kai_scale_model.runner_interface import OUTCOME
from kai_scale_model.scenario import Scenario

log = logging.getLogger(__name__)


class MetricsMissingError(RuntimeError):
    """Some metrics could not be collected; raised after the metrics document marks them missing."""


def _window(ti: RuntimeTaskInstanceProtocol, bucket: ResultsBucketHook, scenario: str) -> Window | None:
    outputs = recorded_outputs(ti, scenario)
    outcome_text = bucket.read_text(outputs["keys"][OUTCOME]) if outputs else None
    try:
        outcome = json.loads(outcome_text) if outcome_text else None
    except json.JSONDecodeError:
        outcome = None  # a truncated outcome.json: the task's own window still holds
    return scenario_window(
        outcome=outcome if isinstance(outcome, dict) else None, task_window=recorded_window(ti, scenario)
    )


def collect_metrics(
    *, settings: PipelineSettings, scenarios: Sequence[Scenario], profile: MetricsProfile, context: Context
) -> str:
    """Write ``runs/<run-id>/metrics.json``, then the profiles; return its key.

    Missing metrics fail it after both are written; missing profiles do not.
    """
    ti = context["ti"]
    run_id = run_id_of(context["dag_run"])
    bucket = ResultsBucketHook(aws_conn_id=settings.aws_conn_id, bucket=settings.results_bucket)
    key = run_metrics_key(run_id)
    selected = [s for s in scenarios if s.name in context["params"]["scenarios"]]
    with bucket.errors_named(f"read the scenarios' outcomes and clear {key} and the profiles"):
        # An earlier try's metrics and profiles must not be published as this try's if this one dies
        # before it writes them.
        bucket.delete(key)
        bucket.delete(run_profiles_key(run_id))
        windows = {s.name: _window(ti, bucket, s.name) for s in selected}
    document = collect_run_metrics(
        run_id=run_id,
        profile=profile,
        scenarios=selected,
        windows=windows,
        connect=PrometheusHook(prometheus_conn_id=settings.prometheus_conn_id).get_conn,
    )
    with bucket.errors_named(f"write {key}"):
        bucket.write_text(key=key, text=json.dumps(document.model_dump(mode="json")))
    for name, entry in document.scenarios.items():
        log.info("%s: metrics %s%s", name, entry.status, f" ({entry.reason})" if entry.reason else "")
    # The same windows: each scenario's profiles of KAI's scheduler, or why they are missing.
    collect_profiles(
        pyroscope_conn_id=settings.pyroscope_conn_id, bucket=bucket, run_id=run_id, windows=windows
    )
    missing = missing_scenarios(document)
    if missing:
        reasons = "; ".join(f"{name}: {document.scenarios[name].reason}" for name in missing)
        # Written first: the run is published with these metrics marked missing.
        raise MetricsMissingError(f"metrics missing (written to {key}, marked missing): {reasons}")
    return key
