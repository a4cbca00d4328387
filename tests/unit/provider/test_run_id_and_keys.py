from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from kai_scale.object_keys import (
    manifest_key,
    published_keys,
    published_keys_beside,
    run_metrics_key,
    run_summary_key,
    scenario_outputs,
)
from kai_scale.run_id import RUN_ID_PATTERN, pipeline_run_id
from kai_scale_model.labels import RUNNER, label_value, object_labels, selector

AIRFLOW_RUN_ID = "scheduled__2026-11-22T02:00:00+00:00"
RUN_AFTER = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)


def test_run_id_is_url_safe_and_stable() -> None:
    run_id = pipeline_run_id(airflow_run_id=AIRFLOW_RUN_ID, run_after=RUN_AFTER)
    assert RUN_ID_PATTERN.match(run_id)
    assert run_id.startswith("20261122T020000Z-scheduled-")
    assert run_id == pipeline_run_id(airflow_run_id=AIRFLOW_RUN_ID, run_after=RUN_AFTER)


def test_run_ids_sort_by_time_and_differ_within_a_second() -> None:
    later = RUN_AFTER + timedelta(hours=24)
    assert pipeline_run_id(airflow_run_id="manual__x", run_after=RUN_AFTER) < pipeline_run_id(
        airflow_run_id="manual__a", run_after=later
    )
    a = pipeline_run_id(airflow_run_id="manual__2026-11-22T02:00:00.1+00:00", run_after=RUN_AFTER)
    b = pipeline_run_id(airflow_run_id="manual__2026-11-22T02:00:00.2+00:00", run_after=RUN_AFTER)
    assert a != b


def test_run_id_is_in_utc() -> None:
    local = RUN_AFTER.astimezone(timezone(timedelta(hours=5)))
    assert pipeline_run_id(airflow_run_id="x", run_after=local).startswith("20261122T020000Z-")


def test_each_try_has_its_own_keys() -> None:
    first = scenario_outputs(run_id="r1", scenario="reclaim", try_number=1)
    second = scenario_outputs(run_id="r1", scenario="reclaim", try_number=2)
    assert first.outcome == "runs/r1/scenarios/reclaim/try-1/outcome.json"
    assert second.ginkgo_report == "runs/r1/scenarios/reclaim/try-2/ginkgo-report.json"
    assert second.suite_results == "runs/r1/scenarios/reclaim/try-2/kwok_scale_test.json"
    assert run_summary_key("r1") == "runs/r1/run-summary.json"


def test_labels_are_valid_label_values() -> None:
    assert label_value("manual__2026-11-22T02:00:00+00:00") == "manual__2026-11-22T02-00-00-00-00"
    assert len(label_value("x" * 100)) == 63
    labels = object_labels(run_id="r1", scenario="reclaim", role=RUNNER)
    assert selector(labels) == (
        "app.kubernetes.io/managed-by=kai-scale-pipeline,kai-scale.dev/role=runner,"
        "kai-scale.dev/run-id=r1,kai-scale.dev/scenario=reclaim"
    )


def test_published_keys_are_under_the_prefix_and_run_id() -> None:
    keys = published_keys(prefix="Public/", run_id="20261122T020000Z-scheduled-1a2b3c4d")
    assert keys.results == "Public/20261122T020000Z-scheduled-1a2b3c4d/results.json"
    assert keys.ginkgo_report == "Public/20261122T020000Z-scheduled-1a2b3c4d/ginkgo-report.json"
    assert keys.metrics == "Public/20261122T020000Z-scheduled-1a2b3c4d/metrics.json"
    assert manifest_key("Public/") == "Public/manifest.json"
    assert run_metrics_key("r1") == "runs/r1/metrics.json"


@pytest.mark.parametrize("prefix", ["Public/", "team-a/Public/", ""])
def test_a_runs_objects_are_found_beside_its_results_document(prefix: str) -> None:
    keys = published_keys(prefix=prefix, run_id="r1")
    assert published_keys_beside(keys.results) == keys
