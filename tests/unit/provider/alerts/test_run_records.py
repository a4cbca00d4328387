"""What an alert takes from its callback's context, without Airflow's services behind it."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.log import mask_secret

from kai_scale.alerts import run_records
from kai_scale.alerts.message import FailedTask
from kai_scale.alerts.run_records import AlertOptions, failed_alert_from, overdue_alert_from, run_alert
from kai_scale.run_id import pipeline_run_id
from tests.failed_night import RECLAIM_REASON, RUN_ID, failed_night

AIRFLOW_RUN_ID = "scheduled__2026-11-22T02:00:00+00:00"
OPTIONS = AlertOptions(
    results_bucket="kai-scale-results", results_prefix="Public/", results_url=None, limit="6h"
)


def _deadline_context(state: str, conf: dict[str, Any] | None = None) -> dict[str, Any]:
    """As the scheduler gives a deadline's callback: the run as the API serializes it."""
    return {
        "dag_run": {
            "dag_id": "kai_scale_nightly",
            "dag_run_id": AIRFLOW_RUN_ID,
            "run_after": "2026-11-22T02:00:00Z",
            "queued_at": "2026-11-22T02:00:04Z",
            "state": state,
            "conf": conf,
        },
        "deadline": {"id": "0195", "deadline_time": "2026-11-22T08:00:04Z"},
    }


@pytest.mark.parametrize("state", ["success", "failed"])
def test_a_finished_run_gets_no_overdue_alert(state: str) -> None:
    assert overdue_alert_from(_deadline_context(state), options=OPTIONS) is None


def test_an_overdue_alert_from_the_deadlines_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/")
    alert = overdue_alert_from(
        _deadline_context("running", {"node_count": 2000}),
        options=OPTIONS,
        now=datetime(2026, 11, 22, 8, 0, 9, tzinfo=UTC),
    )
    assert alert is not None
    run_id = pipeline_run_id(airflow_run_id=AIRFLOW_RUN_ID, run_after=datetime(2026, 11, 22, 2, tzinfo=UTC))
    assert alert.subject == f"[KAI scale] run {run_id} (2000 nodes) still running after 6h5s (limit 6h)"
    assert alert.payload["links"]["airflow_run"] == (
        "https://airflow.example.com/dags/kai_scale_nightly/runs/scheduled__2026-11-22T02%3A00%3A00%2B00%3A00"
    )


def test_a_scheduled_run_without_conf_has_the_default_node_count_and_links_fall_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "")
    alert = run_alert(_deadline_context("queued"), event="overdue", options=OPTIONS.as_kwargs())
    assert alert is not None
    assert alert.payload["node_count"] == 500
    assert alert.payload["links"]["airflow_run"].startswith(
        "http://localhost:8080/dags/kai_scale_nightly/runs/"
    )


def test_a_failed_run_is_alerted_even_when_its_records_cannot_be_read() -> None:
    """Here no dag-processor stands behind the task SDK: the reads fail, the alert says so and goes."""
    context = {
        "dag": SimpleNamespace(dag_id="kai_scale_nightly"),
        "run_id": AIRFLOW_RUN_ID,
        "reason": "task_failure",
    }
    alert = failed_alert_from(context, options=OPTIONS)
    assert alert.payload["unread"]
    assert "Some of the run's records could not be read: " in alert.text
    assert alert.subject == f"[KAI scale] run {AIRFLOW_RUN_ID} (node count unknown) failed: the run failed"


def _with_records(monkeypatch: pytest.MonkeyPatch, summary: object, verdicts: dict[str, Any] | None) -> None:
    """The XComs as the dag-processor would answer them."""
    records = run_records._Records(
        summary=summary, verdicts=verdicts, failed_tasks=[FailedTask(task_id="publish_results", error="boom")]
    )
    monkeypatch.setattr(run_records, "_records", lambda dag_id, airflow_run_id: records)


FAILED_CONTEXT = {"dag": SimpleNamespace(dag_id="kai_scale_nightly"), "run_id": AIRFLOW_RUN_ID}


def test_the_run_summary_in_xcom_is_read_into_the_alert(monkeypatch: pytest.MonkeyPatch) -> None:
    summary, verdicts = failed_night()
    _with_records(monkeypatch, summary, verdicts)
    alert = failed_alert_from(FAILED_CONTEXT, options=OPTIONS)
    assert (alert.payload["run_id"], alert.payload["node_count"], alert.payload["unread"]) == (
        RUN_ID,
        500,
        None,
    )
    assert alert.payload["summary_written"] is True
    assert alert.payload["failed_scenarios"] == [
        {"scenario": "reclaim", "reason": RECLAIM_REASON, "failure_kind": "scenario"}
    ]


def test_a_run_summary_in_xcom_that_is_not_one_is_named_and_the_alert_goes_with_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    summary, verdicts = failed_night()
    del summary["scenarios"][1]["status"]
    _with_records(monkeypatch, summary, verdicts)
    alert = failed_alert_from(FAILED_CONTEXT, options=OPTIONS)
    assert alert.payload["unread"] == (
        "RunSummaryError: run summary XCom 'run_summary' of publish_results "
        f"(run {AIRFLOW_RUN_ID}): 'scenarios.1.status' Field required"
    )
    assert alert.payload["summary_written"] is False
    # The verdicts and the failed tasks are still told.
    assert alert.payload["verdict"] == "failure"
    assert alert.payload["failed_tasks"] == [{"task_id": "publish_results", "error": "boom"}]


def test_verdicts_in_xcom_that_are_not_them_are_named_and_the_summary_is_still_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    summary, verdicts = failed_night()
    del verdicts["method"]
    _with_records(monkeypatch, summary, verdicts)
    alert = failed_alert_from(FAILED_CONTEXT, options=OPTIONS)
    assert alert.payload["unread"] == (
        f"VerdictsError: verdicts XCom 'verdicts' of publish_results (run {AIRFLOW_RUN_ID}): "
        "'method' Field required"
    )
    assert alert.payload["verdict"] == "failure", "the summary's, as the verdicts' cannot be read"
    assert [s["scenario"] for s in alert.payload["failed_scenarios"]] == ["reclaim"]
    assert (alert.payload["threshold_breaches"], alert.payload["links"]["verdicts"]) == ([], None)


def test_a_tasks_recorded_error_has_the_secrets_it_registered_masked() -> None:
    """Airflow's own masker, as in the task's process; the task instance is a stand-in holding its XComs."""
    secret = "b1c2d3e4f5-signature"  # a presigned URL's signature, as the pod operator registers it
    mask_secret(secret)
    pushed: dict[str, Any] = {}
    ti = SimpleNamespace(xcom_push=lambda key, value: pushed.update({key: value}))
    error = RuntimeError(f"run published to s3://kai-scale-results/Public/r/results.json?sig={secret}")
    run_records.record_task_failure({"exception": error, "ti": ti})
    assert pushed == {
        run_records.FAILURE_XCOM_KEY: "RuntimeError: run published to s3://kai-scale-results/Public/r/results.json?sig=***"
    }
