"""A night of stand-in scenarios on the chart-deployed Airflow: the runner's paths KAI's suite does not take.

The release is given scenario files of its own (a ConfigMap mounted into every pod, as a deployment
changes its scenarios without a new image) and the runner image with the stand-in suite
(tests/standin/kai_suite_standin.py): a pass, a failure, a truncated report, a suite that hangs past
its timeout, and a small workload. One night runs them all, so that each test reads what it needs of
the same run.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
import yaml
from kubernetes import client

from kai_scale.operators.scenario_pod import scenario_task_id
from kai_scale_model import labels
from localenv import settings as localenv_settings
from localenv.airflow import TASK_LOGS_PREFIX, AirflowApi, AirflowDeployment
from localenv.demo import DAG_ID, follow, run_summary, task_instances, trigger, wait_for_dag
from localenv.environment import LocalEnvironment
from tests.integration.airflow_env import (
    TEST_RUNNER_IMAGE,
    published_run,
    push_test_runner_image,
    standin_scenario,
    workload_scenario,
)

pytestmark = [pytest.mark.restarts_local_env, pytest.mark.usefixtures("s3_from_this_machine")]

NODE_COUNT = 20
SCENARIOS: dict[str, dict[str, Any]] = {
    "standin-pass": standin_scenario("pass"),
    "standin-fail": standin_scenario("fail"),
    "standin-truncated": standin_scenario("truncate"),
    "standin-hangs": standin_scenario("hang", timeout="5s"),
    "small-workload": workload_scenario(),
}


@dataclass(frozen=True)
class StandinNight:
    """The night's Airflow run, its task instances by task id, its summary and its task logs in S3."""

    run_id: str
    state: str
    instances: dict[str, dict[str, Any]]
    summary: dict[str, Any]
    logs: dict[str, str]
    """Each task log's text by its key in the bucket."""

    def state_of(self, scenario: str) -> str:
        """The state of the scenario's task."""
        return str(self.instances[scenario_task_id(scenario)]["state"])

    def entry(self, scenario: str) -> dict[str, Any]:
        """The scenario's entry of the run summary."""
        return next(entry for entry in self.summary["scenarios"] if entry["scenario"] == scenario)


@pytest.fixture(scope="module")
def night(
    airflow_deployment: AirflowDeployment, airflow_api: AirflowApi, local_env: LocalEnvironment
) -> StandinNight:
    """The release with the stand-in scenarios and runner image, and a night of every scenario."""
    push_test_runner_image(local_env)
    tuned = airflow_deployment.overrides
    airflow_deployment.deploy(
        dataclasses.replace(
            tuned,
            env={**tuned.env, "KAI_SCALE_RUNNER_IMAGE": TEST_RUNNER_IMAGE},
            scenarios={
                f"{name}.yaml": yaml.safe_dump({"name": name, **body}) for name, body in SCENARIOS.items()
            },
        )
    )
    wait_for_dag(airflow_api, since=datetime.now(UTC))  # the release before is gone
    run_id = trigger(airflow_api, {"node_count": NODE_COUNT})
    state = follow(airflow_api, run_id)
    summary = run_summary(airflow_api, run_id)
    assert summary is not None, f"run {run_id} published no summary"
    return StandinNight(
        run_id=run_id,
        state=state,
        instances={ti["task_id"]: ti for ti in task_instances(airflow_api, run_id)},
        summary=summary,
        logs=_task_logs(run_id),
    )


def _task_logs(run_id: str) -> dict[str, str]:
    """The run's task logs in the bucket (remote logging), by key."""
    s3 = boto3.client("s3")  # endpoint and credentials from the AWS_* variables of the local environment
    logs = {}
    prefix = f"{TASK_LOGS_PREFIX}dag_id={DAG_ID}/run_id={run_id}/"
    bucket = localenv_settings.DEFAULT_BUCKET
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            logs[item["Key"]] = (
                s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read().decode(errors="replace")
            )
    return logs


@pytest.mark.timeout(2400)  # the module's night: an upgrade, the setup, five scenarios
def test_a_failed_scenario_fails_the_run_after_publishing_and_stops_no_other(night: StandinNight) -> None:
    assert night.state == "failed"
    assert night.instances["publish_results"]["state"] == "failed", "failed after its summary is written"
    assert night.instances["tear_down_environment"]["state"] == "success"
    assert night.state_of("standin-pass") == "success"
    assert night.state_of("small-workload") == "success"
    assert night.state_of("standin-fail") == "failed"


def test_the_runners_ginkgo_path_gives_each_report_its_own_outcome(night: StandinNight) -> None:
    """A pass, a failure and a truncated report; the readable ones merged into the published report."""
    passed = night.entry("standin-pass")
    assert passed["status"] == "success"
    assert passed["outcome"]["tests"] == [
        {
            "test_name": "Fill Cluster with single GPU Jobs",
            "status": "success",
            "details": {"nodes": NODE_COUNT, "jobs": 8 * NODE_COUNT, "time": "6m36.737854402s"},
        }
    ]
    failed = night.entry("standin-fail")
    assert (failed["status"], failed["failure_kind"]) == ("failure", "scenario"), "the suite ran and failed"
    assert "expected all 4000 pods to be scheduled" in failed["reason"]
    truncated = night.entry("standin-truncated")
    assert night.state_of("standin-truncated") == "failed"
    assert "Ginkgo JSON report is unreadable (truncated?)" in truncated["reason"]

    published = published_run(str(night.summary["run_id"]))
    results = published["results"]["results"]
    assert (results["status"], results["failure_kind"]) == ("failure", "scenario")
    assert sorted(suite["SuiteSucceeded"] for suite in published["report"]) == [False, True], (
        "the pass and fail reports merged; the truncated one left out"
    )
    (entry,) = published["entries"]
    assert entry["status"] == "failure"


def test_a_scenario_past_its_timeout_is_stopped_and_the_others_run(night: StandinNight) -> None:
    assert night.state_of("standin-hangs") == "failed"
    assert night.entry("standin-hangs")["status"] == "failure"
    assert night.state_of("small-workload") == "success"


def test_no_signed_upload_url_reaches_a_log_an_xcom_or_the_suite(
    night: StandinNight, airflow_api: AirflowApi, core: client.CoreV1Api
) -> None:
    """The failed pod's task log included; each try's URL Secret is gone once its pod ended."""
    runner_logs = "\n".join(text for key, text in night.logs.items() if "task_id=run_" in key)
    assert "stand-in suite: upload URLs in my environment: False" in runner_logs
    assert "stand-in suite: upload URLs in my environment: True" not in runner_logs
    assert not [key for key, text in night.logs.items() if "X-Amz-Signature" in text]
    xcoms = [
        airflow_api.get(f"/dags/{DAG_ID}/dagRuns/{night.run_id}/taskInstances/{task}/xcomEntries")
        for task in night.instances
    ]
    assert "X-Amz-Signature" not in json.dumps(xcoms)
    secrets = core.list_namespaced_secret(
        "kai-scale", label_selector=f"{labels.ROLE}={labels.RUNNER_OUTPUTS}"
    )
    assert secrets.items == []
