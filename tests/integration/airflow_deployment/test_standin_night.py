"""Stand-in scenarios on the chart-deployed Airflow: the runner's paths KAI's suite does not take, and faults.

The release is given scenario files of its own (a ConfigMap mounted into every pod, as a deployment
changes its scenarios without a new image) and the runner image with the stand-in suite
(tests/standin/kai_suite_standin.py): a pass, a failure, a truncated report, a suite that hangs past
its timeout, a slow one (60 s), and a small workload. One night runs them all, so that each test
reads what it needs of the same run.

The night also meets faults of the target cluster, as a deployment meets them: a GPU job left in a
namespace of KAI's suite by an earlier night (freed before the first scenario); the API server killed
and down for 20 s while a scenario's runner runs (here it is also the API server of Airflow's own
cluster: the executor, the workers and the UI's port-forward all lose it); and a Prometheus the
workers cannot reach (the operator's connection points at a closed port: collect_metrics fails and
the run is published with its metrics missing). A connection is changed in the Secret the worker
pods read it from (deploy/airflow/values.yaml), as an operator changes it, and put back after.

A second, short night has its cluster connection pointing at a closed port: it fails at its check.

The release keeps these overrides for the package's modules after this one (only test_trend_view.py,
which changes its api-server's env alone and runs no night): upgrading back would restart every pod.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
import yaml
from kubernetes import client

from kai_scale.operators.scenario_pod import scenario_task_id
from kai_scale.settings import DEFAULT_NAMESPACE
from kai_scale_model import labels
from localenv import settings as localenv_settings
from localenv.airflow import NAMESPACE, AirflowApi, AirflowDeployment
from localenv.demo import follow, run_path, run_summary, task_instances, trigger, wait_for_dag
from localenv.environment import LocalEnvironment
from tests.integration.airflow_env import (
    TEST_RUNNER_IMAGE,
    published_run,
    push_test_runner_image,
    standin_scenario,
    task_logs,
    workload_scenario,
)
from tests.integration.cluster_faults import restart_api_server
from tests.waiting import wait_for

pytestmark = [pytest.mark.restarts_local_env, pytest.mark.usefixtures("s3_from_this_machine")]

NODE_COUNT = 20
SCENARIOS: dict[str, dict[str, Any]] = {
    "standin-pass": standin_scenario("pass"),
    "standin-fail": standin_scenario("fail"),
    "standin-truncated": standin_scenario("truncate"),
    "standin-hangs": standin_scenario("hang", timeout="5s"),
    "standin-slow": standin_scenario("slow", STANDIN_SECONDS="60"),
    "small-workload": workload_scenario(),
}
API_SERVER_DOWN_SECONDS = 20
# Where the night's Prometheus connection points: a closed port of the worker pod itself.
UNREACHABLE_PROMETHEUS = {"conn_type": "prometheus", "host": "127.0.0.1", "port": 9, "schema": "http"}
# The second night's cluster connection: a kubeconfig of a server nobody runs (a closed port).
NOBODY_SERVES = "https://127.0.0.1:9"
UNREACHABLE_CLUSTER = {
    "conn_type": "kubernetes",
    "extra": {
        "in_cluster": False,
        "kube_config": {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "gone",
            "clusters": [
                {"name": "gone", "cluster": {"server": NOBODY_SERVES, "insecure-skip-tls-verify": True}}
            ],
            "users": [{"name": "gone", "user": {"token": "x"}}],
            "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "gone"}}],
        },
    },
}


@dataclass(frozen=True)
class StandinNight:
    """The night's Airflow run, its task instances by task id, its summary and its task logs in S3."""

    run_id: str
    state: str
    instances: dict[str, dict[str, Any]]
    summary: dict[str, Any]
    """The run summary publish_results pushed (empty when it pushed none)."""
    logs: dict[str, str]
    """Each task log's text by its key in the bucket."""

    def state_of(self, scenario: str) -> str:
        """The state of the scenario's task."""
        return str(self.instances[scenario_task_id(scenario)]["state"])

    def entry(self, scenario: str) -> dict[str, Any]:
        """The scenario's entry of the run summary."""
        return next(entry for entry in self.summary["scenarios"] if entry["scenario"] == scenario)

    def log_of(self, task_id: str) -> str:
        """The task's log (every try's), from the bucket."""
        return "\n".join(text for key, text in sorted(self.logs.items()) if f"/task_id={task_id}/" in key)


@contextmanager
def _connection_changed(core: client.CoreV1Api, conn_id: str, body: dict[str, Any]) -> Iterator[None]:
    """The connection changed in kai-scale-connections (each new worker pod reads it); then put back."""
    secret = core.read_namespaced_secret("kai-scale-connections", NAMESPACE)
    before = secret.data[conn_id]
    changed = base64.b64encode(json.dumps(body).encode()).decode()
    core.patch_namespaced_secret("kai-scale-connections", NAMESPACE, {"data": {conn_id: changed}})
    try:
        yield
    finally:
        core.patch_namespaced_secret("kai-scale-connections", NAMESPACE, {"data": {conn_id: before}})


@contextmanager
def _gpu_job_left_in_a_suite_namespace(core: client.CoreV1Api) -> Iterator[str]:
    """A namespace of KAI's suite with a pod holding one GPU, as a failed spec of an earlier night leaves.

    The pod is bound to a Node object of its own that no kubelet serves (the night's KWOK nodes do not
    exist yet), and tolerates that node being unreachable: neither the pod garbage collector (which
    removes pods of nodes that do not exist) nor the node controller's eviction removes it before the
    night's first scenario does.
    """
    node = f"held-gpus-{uuid.uuid4().hex[:6]}"
    namespace = f"kai-e2e-{uuid.uuid4().hex[:6]}"
    forever = [
        {"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute"}
        for taint in ("unreachable", "not-ready")
    ]
    try:
        core.create_node({"metadata": {"name": node}})
        core.create_namespace({"metadata": {"name": namespace, "labels": {"app": "engine-e2e"}}})
        core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"name": "leftover-job"},
                "spec": {
                    "nodeName": node,
                    "tolerations": forever,
                    "containers": [
                        {"name": "main", "image": "pause", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                    ],
                },
            },
        )
        yield namespace
    finally:
        _delete_if_there(lambda: core.delete_namespace(namespace))  # the night deletes it, as it should
        _delete_if_there(lambda: core.delete_node(node))


def _delete_if_there(delete: Callable[[], object]) -> None:
    """Run ``delete``; what is gone already (404) is no error."""
    try:
        delete()
    except client.ApiException as error:
        if error.status != 404:
            raise


@pytest.fixture(scope="module")
def night(
    airflow_deployment: AirflowDeployment,
    airflow_api: AirflowApi,
    local_env: LocalEnvironment,
    core: client.CoreV1Api,
) -> StandinNight:
    """The release with the stand-in scenarios and runner image; a night of them all, with the faults."""
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
    with (
        _gpu_job_left_in_a_suite_namespace(core),
        _connection_changed(core, "prometheus_default", UNREACHABLE_PROMETHEUS),
    ):
        night = _night(
            airflow_api,
            {"node_count": NODE_COUNT},
            meanwhile=lambda run_id: _restart_the_api_server_while_slow_runs(
                local_env, core, airflow_api, run_id
            ),
        )
    assert night.summary, f"run {night.run_id} published no summary"
    return night


@pytest.fixture(scope="module")
def night_without_its_cluster(
    night: StandinNight, airflow_api: AirflowApi, core: client.CoreV1Api
) -> StandinNight:
    """A night whose cluster connection points at a closed port; after the module's other night."""
    with _connection_changed(core, "kubernetes_default", UNREACHABLE_CLUSTER):
        return _night(airflow_api, {"node_count": NODE_COUNT, "scenarios": ["small-workload"]})


def _restart_the_api_server_while_slow_runs(
    local_env: LocalEnvironment, core: client.CoreV1Api, api: AirflowApi, run_id: str
) -> None:
    """Once standin-slow's runner runs (60 s), kube-apiserver is killed and started again 20 s later."""

    def runner_running_or_run_over() -> bool:
        selector = f"{labels.SCENARIO}=standin-slow"
        pods = core.list_namespaced_pod(DEFAULT_NAMESPACE, label_selector=selector).items
        running = any(pod.status.phase == "Running" for pod in pods)
        return running or api.get(run_path(run_id))["state"] in ("success", "failed")

    wait_for(runner_running_or_run_over, timeout=1200, what="standin-slow's runner to run", interval=0.5)
    time.sleep(5)  # well inside the scenario
    restart_api_server(local_env, down_seconds=API_SERVER_DOWN_SECONDS)


def _night(
    api: AirflowApi, conf: dict[str, Any], *, meanwhile: Callable[[str], None] | None = None
) -> StandinNight:
    """Trigger a run with ``conf`` through the REST API, follow it to its end, and read what it left.

    ``meanwhile`` is given the run's id once it is triggered, before it is followed.
    """
    run_id = trigger(api, conf)
    try:
        if meanwhile is not None:
            meanwhile(run_id)
        state = follow(api, run_id)
    except BaseException:
        # Not left running into the next module's tests: marked failed, its tasks stopped by Airflow.
        api.request("PATCH", run_path(run_id), json={"state": "failed"})
        raise
    return StandinNight(
        run_id=run_id,
        state=state,
        instances={ti["task_id"]: ti for ti in task_instances(api, run_id)},
        summary=run_summary(api, run_id) or {},
        logs=task_logs(run_id),
    )


@pytest.mark.timeout(2400)  # the module's night: an upgrade, the setup, six scenarios
def test_a_failed_scenario_fails_the_run_after_publishing_and_stops_no_other(night: StandinNight) -> None:
    assert night.state == "failed"
    assert night.instances["publish_results"]["state"] == "failed", "failed after its summary is written"
    published = night.log_of("publish_results")
    assert '"exc_type":"RunFailedError"' in published  # the task log's lines are JSON
    assert "run published to s3://" in published
    assert "with problems: " in published
    assert "standin-fail: " in published, "the failed scenario is one of the reasons"
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
    assert _ginkgo_report(passed)[0]["SuiteSucceeded"] is True
    failed = night.entry("standin-fail")
    assert (failed["status"], failed["failure_kind"]) == ("failure", "scenario"), "the suite ran and failed"
    assert "expected all 4000 pods to be scheduled" in failed["reason"]
    assert failed["outcome"]["tests"][0]["status"] == "failure"
    truncated = night.entry("standin-truncated")
    assert night.state_of("standin-truncated") == "failed"
    assert truncated["status"] == "failure"
    assert "Ginkgo JSON report is unreadable (truncated?)" in truncated["reason"]

    published = published_run(str(night.summary["run_id"]))
    results = published["results"]["results"]
    assert (results["status"], results["failure_kind"]) == ("failure", "scenario")
    assert sorted(suite["SuiteSucceeded"] for suite in published["report"]) == [False, True, True], (
        "the pass, slow and fail reports merged; the truncated one left out"
    )
    (entry,) = published["entries"]
    assert entry["status"] == "failure"


def _ginkgo_report(entry: dict[str, Any]) -> Any:
    """The Ginkgo report the scenario's runner uploaded, read from the bucket."""
    s3 = boto3.client("s3")
    report = s3.get_object(Bucket=localenv_settings.DEFAULT_BUCKET, Key=entry["ginkgo_report_key"])
    return json.loads(report["Body"].read())


def test_a_scenario_past_its_timeout_is_stopped_and_the_others_run(night: StandinNight) -> None:
    assert night.state_of("standin-hangs") == "failed"
    hung = night.entry("standin-hangs")
    assert hung["status"] == "failure"
    assert "the runner pod produced no outcome" in hung["reason"], hung["reason"]
    log = night.log_of(scenario_task_id("standin-hangs"))
    assert "mode=hang" in log, "the suite started, and hung"
    assert "scenario standin-hangs failed: stopped at its timeout (5s)" in log, "the task's error says why"
    # The stand-in hangs for an hour: its pod was stopped at the scenario's deadline (5 s), not at the end.
    assert night.instances[scenario_task_id("standin-hangs")]["duration"] < 300
    assert night.state_of("small-workload") == "success"


def test_no_signed_upload_url_reaches_a_log_an_xcom_or_the_suite(
    night: StandinNight, airflow_api: AirflowApi, core: client.CoreV1Api
) -> None:
    """The failed pod's task log included; each try's URL Secret is gone once its pod ended."""
    runner_logs = "\n".join(text for key, text in night.logs.items() if "task_id=run_" in key)
    assert "stand-in suite: upload URLs in my environment: False" in runner_logs
    assert "stand-in suite: upload URLs in my environment: True" not in runner_logs
    assert not [key for key, text in night.logs.items() if "X-Amz-Signature" in text]
    values = []
    for task in night.instances:
        entries = f"{run_path(night.run_id)}/taskInstances/{task}/xcomEntries"
        for xcom in airflow_api.get(entries)["xcom_entries"]:
            values.append(airflow_api.get(f"{entries}/{xcom['key']}", params={"deserialize": True})["value"])
    assert any("runs/" in json.dumps(value) for value in values), "the values themselves were read"
    assert "X-Amz-Signature" not in json.dumps(values)
    secrets = core.list_namespaced_secret(
        DEFAULT_NAMESPACE, label_selector=f"{labels.ROLE}={labels.RUNNER_OUTPUTS}"
    )
    assert secrets.items == [], "each try's URL Secret is deleted when its pod ends"


def test_a_gpu_job_an_earlier_night_left_is_freed_before_the_first_scenario(night: StandinNight) -> None:
    first = min(
        (ti for ti in night.instances.values() if ti["task_id"].startswith("run_")),
        key=lambda ti: str(ti["start_date"]),
    )
    log = night.log_of(first["task_id"])
    assert "deleted 1 namespaces of KAI's suite left by an earlier scenario" in log, log[-3000:]
    scenario = next(name for name in SCENARIOS if scenario_task_id(name) == first["task_id"])
    assert f"all nvidia.com/gpu free before {scenario}" in log


def test_an_unreachable_prometheus_still_publishes_the_run_with_its_metrics_missing(
    night: StandinNight,
) -> None:
    """The published copy names no internal address; the operators' internal copy keeps it."""
    assert night.instances["collect_metrics"]["state"] == "failed"
    assert "Prometheus at http://127.0.0.1:9 is unreachable" in night.log_of("collect_metrics")
    assert "metrics missing for " in night.log_of("publish_results"), "one of the run's failure reasons"
    run_id = str(night.summary["run_id"])
    published = published_run(run_id)
    tests = {test["test_name"]: test for test in published["results"]["results"]["tests"]}
    assert tests["GPU pod scheduling throughput"]["status"] == "success", "the scenario's result is published"
    missing = published["metrics"]["scenarios"]["small-workload"]
    assert missing["status"] == "missing"
    assert "Prometheus at <prometheus> is unreachable" in missing["reason"]
    assert {metric["status"] for metric in missing["metrics"].values()} == {"missing"}
    assert "prometheus" not in published["metrics"]
    assert "127.0.0.1:9" not in json.dumps(published["metrics"]), "internal addresses stay internal"
    s3 = boto3.client("s3")
    internal = s3.get_object(Bucket=localenv_settings.DEFAULT_BUCKET, Key=f"runs/{run_id}/metrics.json")
    assert json.loads(internal["Body"].read())["prometheus"] == "http://127.0.0.1:9"
    assert len(published["entries"]) == 1


@pytest.mark.timeout(1200)  # a night of its own, short: the setup's check and the teardown, each retried
def test_an_unreachable_cluster_fails_the_night_at_its_check_and_the_teardown_names_it(
    night_without_its_cluster: StandinNight,
) -> None:
    """Teardown runs after a failed setup too; here it cannot reach the cluster either, and says so."""
    unreachable = f"cannot reach the cluster of connection 'kubernetes_default' at {NOBODY_SERVES}"
    assert night_without_its_cluster.state == "failed"
    states = {task: ti["state"] for task, ti in night_without_its_cluster.instances.items()}
    assert states["setup.check_cluster"] == "failed"
    assert states[scenario_task_id("small-workload")] == "upstream_failed"
    assert states["tear_down_environment"] == "failed"
    assert unreachable in night_without_its_cluster.log_of("setup.check_cluster")
    assert unreachable in night_without_its_cluster.log_of("tear_down_environment")


def test_the_api_server_restarting_mid_scenario_loses_nothing(night: StandinNight) -> None:
    """The worker's calls to the API server are retried ([workers] api_retries), and it says so."""
    assert night.state_of("standin-slow") == "success"
    slow = night.entry("standin-slow")
    assert slow["status"] == "success", slow["reason"]
    assert _ginkgo_report(slow)[0]["SuiteSucceeded"] is True, "its outputs uploaded whole"
    assert re.search(
        r"Retrying \S+PodManager\.read_pod in \d+ seconds as it raised KubernetesApiException: There was an "
        r"error reading the kubernetes API",
        night.log_of(scenario_task_id("standin-slow")),
    ), "the task's log says the API server could not be reached while it waited"
    assert len(published_run(str(night.summary["run_id"]))["entries"]) == 1
