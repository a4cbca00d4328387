"""The alert's text and JSON, from a run summary and verdicts made by the pipeline's own code."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kai_scale.alerts.message import AlertRun, FailedTask, failed_run_alert, overdue_run_alert
from kai_scale.publishing.run_summary import ScenarioEntry, run_summary
from kai_scale_model.outcome import FailureKind, Status
from tests.failed_night import FILL, RECLAIM_REASON, RUN_ID, failed_night_documents

AIRFLOW_RUN_ID = "scheduled__2026-11-22T02:00:00+00:00"
RUN = AlertRun(
    dag_id="kai_scale_nightly",
    airflow_run_id=AIRFLOW_RUN_ID,
    run_id=RUN_ID,
    node_count=500,
    airflow_url="https://airflow.example.com/dags/kai_scale_nightly/runs/scheduled__2026-11-22T02%3A00%3A00%2B00%3A00",
    results_url=f"https://results.example.com/Public/{RUN_ID}/results.json",
    verdicts_url=f"https://results.example.com/Public/{RUN_ID}/verdicts.json",
)
PUBLISH_FAILED = FailedTask(
    task_id="publish_results",
    error=f"RunFailedError: run published to s3://kai-scale-results/Public/{RUN_ID}/results.json, "
    f"with problems: reclaim: {RECLAIM_REASON}",
)


def test_a_bad_night_names_each_failed_scenario_breach_and_regression_with_numbers() -> None:
    summary, verdicts = failed_night_documents()
    alert = failed_run_alert(
        run=RUN,
        summary=summary,
        verdicts=verdicts,
        failed_tasks=[PUBLISH_FAILED, FailedTask(task_id="run_reclaim", error=None)],
        reason="task_failure",
    )
    assert alert.subject == (
        f"[KAI scale] run {RUN_ID} (500 nodes) failed: 1 scenario failed, 1 threshold breach, "
        "1 regression, 1 threshold on nothing"
    )
    lines = alert.text.splitlines()
    assert lines[0] == f"The KAI scale-test run {RUN_ID} failed."
    assert f"DAG run:      kai_scale_nightly / {AIRFLOW_RUN_ID}" in lines
    assert "Nodes:        500" in lines
    assert "Verdict:      failure" in lines
    assert "Airflow says: task_failure" in lines
    assert f"  - reclaim: {RECLAIM_REASON}" in lines
    assert f"  - {FILL!r} / 'time': 490 > max 420 (previous run: 484)" in lines
    regression = next(line for line in lines if "->" in line and line.startswith("  - "))
    assert regression.startswith(f"  - {FILL!r} / 'time': 395.683 -> 484.667 (+22.5 %, lower is better, p=")
    assert regression.endswith("since run 20260030-scheduled")
    assert "Regressions (1; before -> after, durations in seconds):" in lines
    changed = lines.index(
        "Where KAI's scheduler spent its CPU differently (1; cumulative shares of its CPU profile against "
        "the previous run's):"
    )
    assert lines[changed + 1].startswith("  - sanity-fill-cluster: CPU "), lines[changed + 1]
    assert "vs baseline 20260031-scheduled; grew most: main.light +" in lines[changed + 1]
    assert f"  - threshold on {FILL!r} / 'jobs': the run produced no such detail" in lines
    assert f"  - {PUBLISH_FAILED.task_id}: {PUBLISH_FAILED.error}" in lines
    assert "  - run_reclaim: no error recorded (see its log)" in lines
    assert lines[-3:] == [
        f"Airflow run:  {RUN.airflow_url}",
        f"Results:      {RUN.results_url}",
        f"Verdicts:     {RUN.verdicts_url}",
    ]
    assert "topology" not in alert.text, "only what went wrong: no skipped scenario"


def test_the_json_says_the_same_as_the_text() -> None:
    summary, verdicts = failed_night_documents()
    alert = failed_run_alert(
        run=RUN, summary=summary, verdicts=verdicts, failed_tasks=[PUBLISH_FAILED], reason="task_failure"
    )
    payload = alert.payload
    assert (payload["subject"], payload["text"], payload["event"]) == (alert.subject, alert.text, "failed")
    assert (payload["run_id"], payload["airflow_run_id"], payload["node_count"]) == (
        RUN_ID,
        AIRFLOW_RUN_ID,
        500,
    )
    assert payload["verdict"] == "failure"
    assert payload["failed_scenarios"] == [
        {"scenario": "reclaim", "reason": RECLAIM_REASON, "failure_kind": "scenario"}
    ]
    assert payload["not_run_scenarios"] == []
    (breach,) = payload["threshold_breaches"]
    assert (breach["detail"], breach["value"], breach["max"], breach["previous"]) == (
        "time",
        490.0,
        420.0,
        484.0,
    )
    (regression,) = payload["regressions"]
    assert regression["test_name"] == FILL
    assert round(regression["before"], 3) == 395.683
    assert round(regression["after"], 3) == 484.667
    assert regression["better"] == "lower"
    assert regression["p_value"] <= 0.001
    assert regression["since_run_id"] == "20260030-scheduled"
    assert payload["failed_tasks"] == [{"task_id": "publish_results", "error": PUBLISH_FAILED.error}]
    assert payload["links"] == {
        "airflow_run": RUN.airflow_url,
        "results": RUN.results_url,
        "verdicts": RUN.verdicts_url,
    }
    assert payload["summary_written"] is True


def test_scenarios_not_run_and_the_pipelines_own_failures_are_told_apart_from_kais() -> None:
    def entry(scenario: str, status: Status, reason: str, kind: FailureKind | None) -> ScenarioEntry:
        return ScenarioEntry(
            scenario=scenario,
            status=status,
            reason=reason,
            failure_kind=kind,
            try_number=1,
            outcome_key=None,
            ginkgo_report_key=None,
            outcome=None,
        )

    not_installed = "KAI not installed: CRD queues.scheduling.run.ai not found"
    entries = [
        entry("topology", "not_run", not_installed, None),
        entry("reclaim", "not_run", not_installed, None),
        entry("gpu-pod-throughput", "failure", "the runner pod produced no outcome", "infrastructure"),
    ]
    summary = run_summary(
        run_id=RUN_ID, params={"node_count": 500}, entries=entries, runner_image="r:main", image_ids={}
    )
    alert = failed_run_alert(run=RUN, summary=summary, verdicts=None, failed_tasks=[])
    assert (
        alert.subject
        == f"[KAI scale] run {RUN_ID} (500 nodes) failed: 1 scenario failed, 2 scenarios not run"
    )
    lines = alert.text.splitlines()
    assert "  - gpu-pod-throughput (infrastructure): the runner pod produced no outcome" in lines
    assert lines[lines.index("Scenarios not run (2):") + 1 :][:2] == [
        f"  - topology: {not_installed}",
        f"  - reclaim: {not_installed}",
    ]
    assert alert.payload["not_run_scenarios"] == [
        {"scenario": "topology", "reason": not_installed},
        {"scenario": "reclaim", "reason": not_installed},
    ]
    assert alert.payload["failed_scenarios"][0]["failure_kind"] == "infrastructure"


def test_without_a_summary_the_alert_says_what_airflow_knows() -> None:
    """publish_results failed before it wrote the summary: the failed tasks and their errors."""
    run = AlertRun(
        dag_id="kai_scale_nightly",
        airflow_run_id=AIRFLOW_RUN_ID,
        run_id=RUN_ID,
        node_count=500,
        airflow_url=RUN.airflow_url,
        results_url=None,
        verdicts_url=None,
    )
    failed = [
        FailedTask(
            task_id="collect_metrics",
            error="PrometheusUnreachable: Prometheus at <prometheus> is unreachable",
        ),
        FailedTask(task_id="publish_results", error="S3Error: cannot write to bucket 'kai-scale-results'"),
    ]
    alert = failed_run_alert(run=run, summary=None, verdicts=None, failed_tasks=failed, reason="task_failure")
    assert alert.subject == (
        f"[KAI scale] run {RUN_ID} (500 nodes) failed: failed tasks collect_metrics, publish_results"
    )
    assert "publish_results wrote no run summary: below is what Airflow knows of the run." in alert.text
    assert "Verdict:      none (the run was not judged)" in alert.text
    assert "  - publish_results: S3Error: cannot write to bucket 'kai-scale-results'" in alert.text
    assert "Results:" not in alert.text
    assert alert.payload["summary_written"] is False
    assert alert.payload["links"]["results"] is None


def test_records_that_could_not_be_read_are_said_and_the_alert_still_goes() -> None:
    run = AlertRun(
        dag_id="kai_scale_nightly",
        airflow_run_id=AIRFLOW_RUN_ID,
        run_id=None,
        node_count=None,
        airflow_url=RUN.airflow_url,
        results_url=None,
        verdicts_url=None,
    )
    alert = failed_run_alert(
        run=run, summary=None, verdicts=None, failed_tasks=[], unread="ServerResponseError: 503"
    )
    assert alert.subject == f"[KAI scale] run {AIRFLOW_RUN_ID} (node count unknown) failed: the run failed"
    assert "Some of the run's records could not be read: ServerResponseError: 503" in alert.text
    assert "No readable run summary: below is what Airflow knows of the run." in alert.text
    assert "wrote no run summary" not in alert.text, "it may have: the records could not be read"
    assert alert.payload["unread"] == "ServerResponseError: 503"


def test_an_overdue_run() -> None:
    queued = datetime(2026, 11, 22, 2, 0, 5, tzinfo=UTC)
    alert = overdue_run_alert(
        run=RUN, queued_at=queued, now=queued + timedelta(hours=6, seconds=3.4), limit=timedelta(hours=6)
    )
    assert alert.subject == f"[KAI scale] run {RUN_ID} (500 nodes) still running after 6h3s (limit 6h)"
    assert alert.text.startswith(
        f"The KAI scale-test run {RUN_ID} has not finished 6h3s after it was queued "
        "(2026-11-22T02:00:05+00:00); the limit is 6h."
    )
    assert f"Airflow run:  {RUN.airflow_url}" in alert.text
    assert alert.payload["event"] == "overdue"
    assert (alert.payload["running_seconds"], alert.payload["limit_seconds"]) == (21603.0, 21600.0)


def test_the_mail_body_is_the_text_escaped_with_links() -> None:
    summary, verdicts = failed_night_documents()
    alert = failed_run_alert(run=RUN, summary=summary, verdicts=verdicts, failed_tasks=[])
    body = alert.html()
    assert body.startswith("<pre>The KAI scale-test run")
    assert body.endswith("</pre>")
    assert "490 &gt; max 420" in body
    assert f'<a href="{RUN.results_url}">{RUN.results_url}</a>' in body
