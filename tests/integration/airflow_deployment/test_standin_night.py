"""The second night: stand-in scenarios with the target cluster's faults, on the first night's setup.

The release has scenario files of its own (the shipped ones and nights.STANDIN_SCENARIOS, a ConfigMap
mounted into every Airflow pod, as a deployment changes its scenarios without a new image), and the
night names the runner image's tag ``standin``: the runner built from docker/runner/Dockerfile with the
stand-in suite (tests/standin/kai_suite_standin.py). The stand-ins take the runner's paths KAI's suite
does not: a pass, a failure, a truncated report, a suite that hangs past its timeout, a slow one (60 s).
The shipped workload (gpu-pod-throughput) runs with them. One night runs them all, so that each test
reads what it needs of the same run.

It meets faults of the target cluster, as a deployment meets them (nights.second_night): a GPU job an
earlier night left in a namespace of KAI's suite; KAI's scheduler off when the first scenario that needs
it starts; the API server killed and down for 20 s while a scenario's runner runs; a Prometheus the
workers cannot reach; the S3 endpoint frozen as publishing starts. After the night, the scenario that
did not run without KAI is cleared through the REST API, as an engineer does from the UI, with its
runner image's tag moved meanwhile.

A third, short night has its cluster connection pointing at a closed port: it fails at its check. A
fourth names a runner image tag nobody pushed, while a cluster policy refuses deleting NodePools: its
teardown fails, and is cleared once the policy is lifted. A fifth runs the passing stand-in at a size
whose published history it is slower than: a regression.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import boto3
import pytest
from kubernetes import client

from kai_scale.object_keys import published_keys
from kai_scale.operators.scenario_pod import scenario_task_id
from kai_scale.settings import DEFAULT_NAMESPACE
from kai_scale_model import labels
from localenv import settings as localenv_settings
from localenv.airflow_api import AirflowApi
from localenv.demo import DAG_ID, run_path
from tests.alert_receivers import SENDER, WEBHOOK_PATH, WEBHOOK_TOKEN, AlertReceivers, html_body, text_of
from tests.integration.airflow_deployment.nights import (
    AWAITS_KAI,
    MISSING_TAG,
    NOBODY_SERVES,
    NODE_COUNT,
    NOTHING_LEFT,
    RECIPIENTS,
    RESULTS_PREFIX,
    RESULTS_URL,
    RUN_ALERT_AFTER_SECONDS,
    S3_FROZEN_SECONDS,
    SEEDED_NEW_LEVEL,
    SEEDED_RUN_IDS,
    SLOW,
    SLOWER,
    SLOWER_NODE_COUNT,
    WORKLOAD,
    Night,
    RefusedTeardown,
    alerts_of,
)
from tests.integration.airflow_env import published_run, read_json

pytestmark = [pytest.mark.restarts_local_env, pytest.mark.usefixtures("s3_from_this_machine")]


@pytest.mark.timeout(3600)  # both nights, when it is the first test to need the second
def test_a_failed_scenario_fails_the_run_after_publishing_and_stops_no_other(second_night: Night) -> None:
    assert second_night.state == "failed"
    assert second_night.instances["publish_results"]["state"] == "failed", (
        "failed after its summary is written"
    )
    published = second_night.log_of("publish_results")
    assert '"exc_type":"RunFailedError"' in published  # the task log's lines are JSON
    assert "run published to s3://" in published
    assert "with problems: " in published
    assert "standin-fail: " in published, "the failed scenario is one of the reasons"
    assert second_night.instances["tear_down_environment"]["state"] == "success"
    assert second_night.state_of("standin-pass") == "success"
    assert second_night.state_of(WORKLOAD) == "success"
    assert second_night.state_of("standin-fail") == "failed"
    assert second_night.first_pass is not None
    assert second_night.first_pass.leftovers == NOTHING_LEFT, "its teardown removed what it added"
    assert second_night.leftovers == NOTHING_LEFT, "and the clear's teardown what the re-run added"


def test_the_runners_ginkgo_path_gives_each_report_its_own_outcome(second_night: Night) -> None:
    """A pass, a failure and a truncated report; the readable ones merged into the published report."""
    passed = second_night.entry("standin-pass")
    assert passed["status"] == "success"
    assert passed["outcome"]["tests"] == [
        {
            "test_name": "Fill Cluster with single GPU Jobs",
            "status": "success",
            "details": {"nodes": NODE_COUNT, "jobs": 8 * NODE_COUNT, "time": "6m36.737854402s"},
        }
    ]
    assert _ginkgo_report(passed)[0]["SuiteSucceeded"] is True
    failed = second_night.entry("standin-fail")
    assert (failed["status"], failed["failure_kind"]) == ("failure", "scenario"), "the suite ran and failed"
    assert "expected all 4000 pods to be scheduled" in failed["reason"]
    assert failed["outcome"]["tests"][0]["status"] == "failure"
    truncated = second_night.entry("standin-truncated")
    assert second_night.state_of("standin-truncated") == "failed"
    assert truncated["status"] == "failure"
    assert "Ginkgo JSON report is unreadable (truncated?)" in truncated["reason"]

    published = published_run(second_night.pipeline_run_id)
    results = published["results"]["results"]
    assert (results["status"], results["failure_kind"]) == ("failure", "scenario")
    assert sorted(suite["SuiteSucceeded"] for suite in published["report"]) == [False, True, True, True], (
        "the reports of the two passes, the slow one and the failure merged; the truncated one left out"
    )
    (entry,) = published["entries"]
    assert entry["status"] == "failure"


def _ginkgo_report(entry: dict[str, Any]) -> Any:
    """The Ginkgo report the scenario's runner uploaded, read from the bucket."""
    s3 = boto3.client("s3")
    report = s3.get_object(Bucket=localenv_settings.DEFAULT_BUCKET, Key=entry["ginkgo_report_key"])
    return json.loads(report["Body"].read())


def test_the_shipped_workload_measures_without_kai(second_night: Night) -> None:
    """gpu-pod-throughput runs first, KAI's scheduler off: it measures kube-scheduler, and needs no KAI."""
    entry = second_night.entry(WORKLOAD)
    assert entry["status"] == "success", entry["reason"]
    (measurement,) = entry["outcome"]["tests"]
    assert measurement["test_name"] == "GPU pod scheduling throughput"
    details = measurement["details"]
    assert details["pods"] == details["scheduled pods"] == 4 * NODE_COUNT, "pods_per_node: 4"
    assert details["throughput average (pods/s)"] > 0


def test_a_scenario_past_its_timeout_is_stopped_and_the_others_run(second_night: Night) -> None:
    assert second_night.state_of("standin-hangs") == "failed"
    hung = second_night.entry("standin-hangs")
    assert hung["status"] == "failure"
    assert "the runner pod produced no outcome" in hung["reason"], hung["reason"]
    log = second_night.log_of(scenario_task_id("standin-hangs"))
    assert "mode=hang" in log, "the suite started, and hung"
    assert "scenario standin-hangs failed: stopped at its timeout (5s)" in log, "the task's error says why"
    # The stand-in hangs for an hour: its pod was stopped at the scenario's deadline (5 s), not at the end.
    assert second_night.instances[scenario_task_id("standin-hangs")]["duration"] < 300
    assert second_night.state_of(WORKLOAD) == "success"


def test_no_signed_upload_url_reaches_a_log_an_xcom_or_the_suite(
    second_night: Night, airflow_api: AirflowApi, core: client.CoreV1Api
) -> None:
    """The failed pod's task log included; each try's URL Secret is gone once its pod ended."""
    runner_logs = "\n".join(text for key, text in second_night.logs.items() if "task_id=run_" in key)
    assert "stand-in suite: upload URLs in my environment: False" in runner_logs
    assert "stand-in suite: upload URLs in my environment: True" not in runner_logs
    assert not [key for key, text in second_night.logs.items() if "X-Amz-Signature" in text]
    values = []
    for task in second_night.instances:
        entries = f"{run_path(second_night.run_id)}/taskInstances/{task}/xcomEntries"
        for xcom in airflow_api.get(entries)["xcom_entries"]:
            values.append(airflow_api.get(f"{entries}/{xcom['key']}", params={"deserialize": True})["value"])
    assert any("runs/" in json.dumps(value) for value in values), "the values themselves were read"
    assert "X-Amz-Signature" not in json.dumps(values)
    secrets = core.list_namespaced_secret(
        DEFAULT_NAMESPACE, label_selector=f"{labels.ROLE}={labels.RUNNER_OUTPUTS}"
    )
    assert secrets.items == [], "each try's URL Secret is deleted when its pod ends"


def test_a_gpu_job_an_earlier_night_left_is_freed_before_the_first_scenario(second_night: Night) -> None:
    first = min(
        (ti for ti in second_night.instances.values() if ti["task_id"].startswith("run_")),
        key=lambda ti: str(ti["start_date"]),
    )
    log = second_night.log_of(first["task_id"])
    assert "deleted 1 namespaces of KAI's suite left by an earlier scenario" in log, log[-3000:]
    scenario = next(name for name in second_night.scenarios if scenario_task_id(name) == first["task_id"])
    assert f"all nvidia.com/gpu free before {scenario}" in log


def test_an_unreachable_prometheus_still_publishes_the_run_with_its_metrics_missing(
    second_night: Night,
) -> None:
    """The published copy names no internal address; the operators' internal copy keeps it.

    As the night ended: the clear's re-run collected the metrics again, Prometheus back.
    """
    first_pass = second_night.first_pass
    assert first_pass is not None
    assert first_pass.instances["collect_metrics"]["state"] == "failed"
    assert "Prometheus at http://127.0.0.1:9 is unreachable" in second_night.log_of("collect_metrics")
    assert "metrics missing for " in second_night.log_of("publish_results"), (
        "one of the run's failure reasons"
    )
    published = first_pass.published
    tests = {test["test_name"]: test for test in published["results"]["results"]["tests"]}
    assert tests["GPU pod scheduling throughput"]["status"] == "success", "the scenario's result is published"
    missing = published["metrics"]["scenarios"][WORKLOAD]
    assert missing["status"] == "missing"
    assert "Prometheus at <prometheus> is unreachable" in missing["reason"]
    assert {metric["status"] for metric in missing["metrics"].values()} == {"missing"}
    assert "prometheus" not in published["metrics"]
    assert "127.0.0.1:9" not in json.dumps(published["metrics"]), "internal addresses stay internal"
    assert first_pass.internal_metrics["prometheus"] == "http://127.0.0.1:9"
    assert len(published["entries"]) == 1


@pytest.mark.timeout(1200)  # a night of its own, short: the setup's check and the teardown, each retried
def test_an_unreachable_cluster_fails_the_night_at_its_check_and_the_teardown_names_it(
    night_without_its_cluster: Night,
) -> None:
    """Teardown runs after a failed setup too; here it cannot reach the cluster either, and says so."""
    unreachable = f"cannot reach the cluster of connection 'kubernetes_default' at {NOBODY_SERVES}"
    assert night_without_its_cluster.state == "failed"
    states = {task: ti["state"] for task, ti in night_without_its_cluster.instances.items()}
    assert states["setup.check_cluster"] == "failed"
    assert states[scenario_task_id(WORKLOAD)] == "upstream_failed"
    assert states["tear_down_environment"] == "failed"
    assert unreachable in night_without_its_cluster.log_of("setup.check_cluster")
    assert unreachable in night_without_its_cluster.log_of("tear_down_environment")


def test_the_api_server_restarting_mid_scenario_loses_nothing(second_night: Night) -> None:
    """The worker's calls to the API server are retried ([workers] api_retries), and it says so."""
    assert second_night.state_of(SLOW) == "success"
    slow = second_night.entry(SLOW)
    assert slow["status"] == "success", slow["reason"]
    assert _ginkgo_report(slow)[0]["SuiteSucceeded"] is True, "its outputs uploaded whole"
    assert re.search(
        r"Retrying \S+PodManager\.read_pod in \d+ seconds as it raised KubernetesApiException: There was an "
        r"error reading the kubernetes API",
        second_night.log_of(scenario_task_id(SLOW)),
    ), "the task's log says the API server could not be reached while it waited"
    assert len(published_run(second_night.pipeline_run_id)["entries"]) == 1


def test_a_scenario_that_did_not_run_without_kai_is_cleared_and_its_entry_replaced_in_place(
    second_night: Night,
) -> None:
    """Its first try waited for KAI's scheduler and did not run; the clear re-ran it and what follows it."""
    first_pass = second_night.first_pass
    assert first_pass is not None
    (first_entry,) = first_pass.published["entries"]
    assert (first_entry["status"], first_entry["not_run_scenarios"]) == ("failure", [AWAITS_KAI])
    first_try = second_night.log_of(scenario_task_id(AWAITS_KAI))
    assert "KAI not ready: its scheduler is not serving" in first_try, first_try[-3000:]
    task = second_night.instances[scenario_task_id(AWAITS_KAI)]
    assert (task["state"], task["try_number"]) == ("success", 2)
    assert second_night.entry(AWAITS_KAI)["status"] == "success"
    assert second_night.instances["setup.wait_for_nodes"]["try_number"] == 2, "the setup re-ran before it"
    others = {
        name: second_night.instances[scenario_task_id(name)]["try_number"] for name in second_night.scenarios
    }
    del others[AWAITS_KAI]
    assert set(others.values()) == {1}, f"only it re-ran: {others}"
    published = published_run(second_night.pipeline_run_id)
    (entry,) = published["entries"]  # the first try's, updated in place
    assert (entry["status"], entry["not_run_scenarios"]) == ("failure", [])
    assert published["metrics"]["scenarios"][AWAITS_KAI]["status"] == "collected", "Prometheus back"


def test_a_tag_moved_between_two_tries_runs_the_image_it_points_at_now(second_night: Night) -> None:
    """The node kept the night's image under the tag; the re-run pulled what the tag names since."""
    first_pass = second_night.first_pass
    assert first_pass is not None
    assert first_pass.image_before != first_pass.image_after
    ran = second_night.summary["runner_image_ids"]
    assert ran[AWAITS_KAI] == first_pass.image_after
    kept = [ran[name] for name in (WORKLOAD, "standin-pass", SLOW)]
    assert kept == [first_pass.image_before] * 3


def test_the_s3_endpoint_frozen_as_publishing_starts_loses_nothing(second_night: Night) -> None:
    """Requests hang until the client's read timeout (20 s) and are retried, each failed attempt logged.

    As the night ended, before the clear published the run again.
    """
    first_pass = second_night.first_pass
    assert first_pass is not None
    publishing = first_pass.instances["publish_results"]
    assert publishing["duration"] >= S3_FROZEN_SECONDS - 15, "publishing really met the outage"
    published_log = second_night.log_of("publish_results")
    bucket = re.escape(localenv_settings.DEFAULT_BUCKET)
    timed_out = rf"S3 \w+ in s3://{bucket} failed on attempt 1 of at most 8 \(\w*Timeout"
    assert re.search(timed_out, published_log), "the task's log says which request timed out"
    assert "BucketError" not in published_log, "no request given up: the run failed for its scenarios"
    published = first_pass.published  # the results, the report and the metrics, each read whole
    ran = [test for test in published["results"]["results"]["tests"] if test["status"] != "skipped"]
    assert len(ran) >= len(second_night.scenarios) - 1, ran
    assert len(published["entries"]) == 1, "one entry per run, however many retries it took"


@pytest.mark.timeout(1800)  # the fourth night: 10 min 45 s with the package's setup, run alone
def test_a_runner_image_nobody_pushed_fails_its_scenario_as_infrastructure(
    night_with_a_missing_runner_image: tuple[Night, RefusedTeardown],
) -> None:
    """The pod cannot start (the registry has no such tag): no outcome, the infrastructure blamed."""
    night, _ = night_with_a_missing_runner_image
    task = scenario_task_id(WORKLOAD)
    assert night.instances[task]["state"] == "failed"
    entry = night.entry(WORKLOAD)
    assert (entry["status"], entry["failure_kind"]) == ("failure", "infrastructure")
    assert "produced no outcome" in entry["reason"], entry["reason"]
    assert (night.summary["status"], night.summary["failure_kind"]) == ("failure", "infrastructure")
    log = night.log_of(task)
    assert "Image cannot be pulled" in log, log[-3000:]
    assert f"runner:{MISSING_TAG}" in log, "the log names the image"
    assert night.state == "failed"


def test_a_teardown_the_cluster_refuses_fails_the_run_and_its_clear_removes_what_was_left(
    night_with_a_missing_runner_image: tuple[Night, RefusedTeardown],
) -> None:
    """A policy forbids deleting NodePools: the teardown fails naming it; cleared once lifted, it succeeds."""
    night, refused = night_with_a_missing_runner_image
    states = {task: ti["state"] for task, ti in refused.instances.items()}
    assert (states["tear_down_environment"], states["check_teardown"]) == ("failed", "failed")
    assert len(refused.leftovers["nodepools"]) == 1, f"the pool it could not delete: {refused.leftovers}"
    assert "NodePools are not deleted here (test policy)" in night.log_of("tear_down_environment")
    assert {"tear_down_environment", "check_teardown"} <= refused.cleared
    assert not {"publish_results", scenario_task_id(WORKLOAD)} & refused.cleared, "only the teardown"
    assert night.instances["tear_down_environment"]["state"] == "success"
    assert night.instances["check_teardown"]["state"] == "success"
    assert night.leftovers == NOTHING_LEFT
    assert night.state == "failed", "its scenario still failed it"


def test_the_clear_of_a_run_whose_overdue_alert_is_pending_moves_the_alert_with_it(
    night_with_a_missing_runner_image: tuple[Night, RefusedTeardown],
) -> None:
    """Airflow 3.3 fails this clear (apache/airflow#70368) but for kai_scale.alerts.deadline_clear."""
    _, refused = night_with_a_missing_runner_image
    assert len(refused.pending_at_clear) == 2, "one overdue alert per channel, still pending at the clear"
    limit = timedelta(seconds=RUN_ALERT_AFTER_SECONDS)
    # Airflow moves them from the clear's own time, which it writes as queued_at a few ms later.
    due = refused.queued_again_at + limit
    assert len(refused.due_after_clear) == 2
    assert all(abs(after - due) < timedelta(seconds=1) for after in refused.due_after_clear), due
    moved = zip(refused.due_after_clear, refused.pending_at_clear, strict=True)
    assert all(after > before for after, before in moved)


def test_a_failed_night_is_alerted_by_mail_and_webhook_from_the_deployed_dag_processor(
    second_night: Night, alerts: AlertReceivers
) -> None:
    """The shipped DAG file's failure callbacks, run by the release's dag-processor.

    Once when the night failed, once more when its clear's re-run did (standin-fail still failed).
    Each mail and its webhook post say the same, through the connections the release was given.
    """
    alerted = alerts_of(alerts, second_night.run_id, event="failed", count=2)
    for message, payload in alerted:
        assert message["Subject"].startswith(
            f"[KAI scale] run {second_night.pipeline_run_id} ({NODE_COUNT} nodes) failed: "
        ), message["Subject"]
        assert (message["From"], message["To"]) == (SENDER, RECIPIENTS)
        text = text_of(html_body(message))
        assert payload["text"] == text, "the webhook says what the mail says"
        assert payload["summary_written"] is True, "read from publish_results' XCom"
        failed = {entry["scenario"]: entry["failure_kind"] for entry in payload["failed_scenarios"]}
        assert failed["standin-fail"] == "scenario", failed
        assert "standin-hangs" in failed, "past its timeout"
        assert "  - standin-fail: " in text
        links = payload["links"]
        assert links["results"] == f"{RESULTS_URL}{second_night.pipeline_run_id}/results.json"
        assert links["airflow_run"].endswith(f"/dags/{DAG_ID}/runs/{quote(second_night.run_id, safe='')}")
    posts = [
        (path, headers)
        for path, headers, post in alerts.webhook.posts
        if post["airflow_run_id"] == second_night.run_id
    ]
    assert {(path, headers["Authorization"]) for path, headers in posts} == {
        (WEBHOOK_PATH, f"Bearer {WEBHOOK_TOKEN}")
    }


def test_a_night_that_cannot_reach_its_cluster_is_alerted_naming_it(
    night_without_its_cluster: Night, alerts: AlertReceivers
) -> None:
    ((message, payload),) = alerts_of(alerts, night_without_its_cluster.run_id, event="failed")
    text = text_of(html_body(message))
    assert f"cannot reach the cluster of connection 'kubernetes_default' at {NOBODY_SERVES}" in text, text
    assert "setup.check_cluster" in {task["task_id"] for task in payload["failed_tasks"]}


def test_a_night_whose_runner_could_not_start_is_alerted_as_the_infrastructures(
    night_with_a_missing_runner_image: tuple[Night, RefusedTeardown], alerts: AlertReceivers
) -> None:
    """Alerted when it failed, and again when the cleared teardown's re-run ended (its scenario failed)."""
    night, _ = night_with_a_missing_runner_image
    for message, payload in alerts_of(alerts, night.run_id, event="failed", count=2):
        failed = {entry["scenario"]: entry["failure_kind"] for entry in payload["failed_scenarios"]}
        assert failed == {WORKLOAD: "infrastructure"}, message["Subject"]


@pytest.mark.timeout(1800)  # the fifth night: 7 min 33 s with the package's setup, run alone
def test_a_night_slower_than_its_history_is_published_then_fails_as_a_regression(
    night_slower_than_its_history: Night,
) -> None:
    """Judged against the history it finds in the bucket: published whole, then failed by its verdict."""
    night = night_slower_than_its_history
    assert night.state_of(SLOWER) == "success"
    assert night.instances["publish_results"]["state"] == "failed", "published, then failed by the regression"
    assert night.instances["tear_down_environment"]["state"] == "success"
    assert night.state == "failed"
    assert night.summary["verdict"] == "regression", night.summary["verdict_reasons"]
    run_id = night.pipeline_run_id
    verdicts = read_json(published_keys(prefix=RESULTS_PREFIX, run_id=run_id).verdicts)
    assert (verdicts["run_id"], verdicts["node_count"], verdicts["verdict"]) == (
        run_id,
        SLOWER_NODE_COUNT,
        "regression",
    )
    started, newest = SEEDED_RUN_IDS[-2], SEEDED_RUN_IDS[-1]
    reason, profiles = verdicts["reasons"]
    assert f"'Fill Cluster with single GPU Jobs' / 'time' regressed since run {started}" in reason
    # Its history was published without profiles: the flagged scenario says it has no profile evidence.
    assert profiles.startswith(f"{SLOWER}: KAI's scheduler's CPU profile not compared: "), profiles
    assert verdicts["profiles"][SLOWER]["flagged"] is True
    time = verdicts["tests"]["Fill Cluster with single GPU Jobs"]["time"]
    change = time["change_point"]
    assert (change["since_run_id"], change["better"]) == (started, "lower")
    assert change["p_value"] <= 0.001
    assert change["current"] == pytest.approx((sum(SEEDED_NEW_LEVEL) + 396.737854402) / 3)
    # The scenario's previous comparable run is the newest night of the history.
    assert verdicts["previous_run_ids"] == {SLOWER: newest}
    assert (time["comparison"]["previous_run_id"], time["comparison"]["previous"]) == (
        newest,
        SEEDED_NEW_LEVEL[-1],
    )
    assert time["comparison"]["current"] == pytest.approx(396.737854402)
    (entry,) = published_run(run_id)["entries"]
    # The scenario passed (status), the run regressed (verdict).
    assert (entry["status"], entry["verdict"], entry["node_count"]) == (
        "success",
        "regression",
        SLOWER_NODE_COUNT,
    )


def test_a_regressing_night_is_alerted_with_its_change_point(
    night_slower_than_its_history: Night, alerts: AlertReceivers
) -> None:
    night = night_slower_than_its_history
    ((message, payload),) = alerts_of(alerts, night.run_id, event="failed")
    run_id = night.pipeline_run_id
    assert message["Subject"] == f"[KAI scale] run {run_id} ({SLOWER_NODE_COUNT} nodes) failed: 1 regression"
    text = text_of(html_body(message))
    started = SEEDED_RUN_IDS[-2]
    regression = next(
        line for line in text.splitlines() if "'Fill Cluster with single GPU Jobs' / 'time'" in line
    )
    assert re.search(r": [23]\d\d(\.\d+)? -> 39\d(\.\d+)? \(\+3\d\.\d %, lower is better, p=", regression), (
        regression
    )
    assert f"since run {started}" in regression
    assert f"Results:      {RESULTS_URL}{run_id}/results.json" in text
    assert payload["verdict"] == "regression"
    (found,) = payload["regressions"]
    assert (found["detail"], found["better"], found["since_run_id"]) == ("time", "lower", started)
    assert found["p_value"] <= 0.001
    errors = {task["task_id"]: task["error"] for task in payload["failed_tasks"]}
    assert f"regressed since run {started}" in errors["publish_results"]
