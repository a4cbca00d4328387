"""Retrying and losing pieces of Airflow mid-run, on the chart-deployed Airflow, through its REST API.

The release runs with scenarios of the tests' own, mounted from a ConfigMap (``KAI_SCALE_SCENARIOS_DIR``,
as a deployment keeps its own): ``flaky`` (the stand-in suite in mode fail-once) fails its first try
while ``steady`` succeeds, and clearing ``run_flaky`` re-runs only it; ``slow`` and ``brief`` (off by
default) run while a worker pod, the scheduler pod or the metadata database is lost.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import boto3
import pytest
import yaml
from kubernetes import client

from kai_scale_model import labels
from localenv import settings as localenv_settings
from localenv.airflow import NAMESPACE, AirflowApi, AirflowDeployment, Overrides
from localenv.demo import DAG_ID, run_path, run_summary, trigger, wait_for_dag
from localenv.environment import LocalEnvironment
from tests.integration.airflow_env import (
    TEST_RUNNER_IMAGE,
    published_run,
    push_test_runner_image,
    standin_scenario,
    workload_scenario,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("kai")
SCENARIOS_IN_POD = "/opt/airflow/test-scenarios"
# Long enough to lose a piece of Airflow and get it back while the runner runs.
SLOW_SECONDS = 120
# Long enough to lose the worker while it runs; it then finishes while no scheduler is up.
BRIEF_SECONDS = 30
FINISHED = {"success", "failed"}


@pytest.fixture(scope="module")
def marker(local_env: LocalEnvironment) -> Iterator[str]:
    """A namespace whose creation tells the stand-in suite that flaky failed once already."""
    name = f"flaky-failed-once-{secrets.token_hex(4)}"
    yield name
    local_env.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=false")


@pytest.fixture(scope="module")
def test_airflow(
    local_env: LocalEnvironment, airflow_deployment: AirflowDeployment, airflow_api: AirflowApi, marker: str
) -> AirflowApi:
    """The release upgraded with the tests' scenarios and runner image, serving the parsed DAG."""
    push_test_runner_image(local_env)
    scenarios = {
        "flaky": standin_scenario("fail-once", STANDIN_MARKER=marker),
        "steady": workload_scenario(),
        "slow": {**standin_scenario("slow", STANDIN_SECONDS=str(SLOW_SECONDS)), "enabled": False},
        "brief": {**standin_scenario("slow", STANDIN_SECONDS=str(BRIEF_SECONDS)), "enabled": False},
    }
    airflow_deployment.deploy(
        Overrides(
            env={
                "KAI_SCALE_SCENARIOS_DIR": SCENARIOS_IN_POD,
                "KAI_SCALE_RUNNER_IMAGE": TEST_RUNNER_IMAGE,
                "KAI_SCALE_RETRY_DELAY_SECONDS": "1",
            },
            files={
                SCENARIOS_IN_POD: {
                    f"{name}.yaml": yaml.safe_dump({"name": name, **body}) for name, body in scenarios.items()
                }
            },
        )
    )
    wait_for_dag(airflow_api)
    wait_for(
        lambda: {"flaky", "steady"} <= _dag_scenarios(airflow_api),
        timeout=300,
        what="the dag-processor to parse the tests' scenarios",
        interval=3,
    )
    return airflow_api


def _dag_scenarios(api: AirflowApi) -> set[str]:
    tasks = api.get(f"/dags/{DAG_ID}/tasks")["tasks"]
    return {task["task_id"].removeprefix("run_").replace("_", "-") for task in tasks}


def _run_state(api: AirflowApi, run_id: str) -> str:
    return str(api.get(run_path(run_id))["state"])


def _task_instances(api: AirflowApi, run_id: str) -> dict[str, dict[str, Any]]:
    listing = api.get(f"{run_path(run_id)}/taskInstances", params={"limit": 100})
    return {ti["task_id"]: ti for ti in listing["task_instances"]}


def _summary(api: AirflowApi, run_id: str) -> dict[str, Any]:
    summary = run_summary(api, run_id)
    assert summary is not None, f"no run summary for {run_id}"
    return summary


def _test_statuses(published: dict[str, Any]) -> dict[str, str]:
    return {test["test_name"]: test["status"] for test in published["results"]["results"]["tests"]}


def _log(api: AirflowApi, run_id: str, task_id: str, try_number: int) -> str:
    answer = api.request(
        "GET",
        f"{run_path(run_id)}/taskInstances/{task_id}/logs/{try_number}",
        params={"full_content": True},
        headers={"Accept": "text/plain"},
    )
    assert answer.status_code == 200, answer.text
    return answer.text


def _wait_finished(api: AirflowApi, run_id: str, what: str) -> str:
    wait_for(lambda: _run_state(api, run_id) in FINISHED, timeout=900, what=what, interval=3)
    return _run_state(api, run_id)


def _runner(core: client.CoreV1Api, scenario: str, phases: set[str]) -> client.V1Pod | None:
    selector = f"{labels.SCENARIO}={scenario},{labels.ROLE}=runner"
    pods = core.list_pod_for_all_namespaces(label_selector=selector).items
    return next((pod for pod in pods if pod.status.phase in phases), None)


def _wait_for_runner(core: client.CoreV1Api, scenario: str) -> client.V1Pod:
    return wait_for(
        lambda: _runner(core, scenario, {"Running"}),
        timeout=600,
        what=f"{scenario}'s runner pod to run",
        interval=1,
    )


def _worker_pod(core: client.CoreV1Api, task_id: str) -> client.V1Pod | None:
    """The KubernetesExecutor's running worker pod of the task (labelled with its dag and task ids)."""
    pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"dag_id={DAG_ID},task_id={task_id}").items
    return next((pod for pod in pods if pod.status.phase == "Running"), None)


@pytest.mark.parametrize(
    ("conf", "field"),
    [({"node_count": 0}, "node_count"), ({"node_count": 10, "scenarios": ["no-such-scenario"]}, "scenarios")],
)
def test_bad_params_are_refused_at_trigger_by_the_deployed_api_server(
    test_airflow: AirflowApi, conf: dict[str, Any], field: str
) -> None:
    answer = test_airflow.request(
        "POST", f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": conf}
    )
    assert answer.status_code == 400, answer.text
    assert field in answer.text


def test_an_unknown_param_is_refused_at_trigger_naming_it(test_airflow: AirflowApi) -> None:
    """Airflow itself would start the run with the key ignored (500 nodes for a typo of node_count)."""
    runs_before = test_airflow.get(f"/dags/{DAG_ID}/dagRuns")["total_entries"]
    answer = test_airflow.request(
        "POST", f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": {"node_cout": 50}}
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"] == (
        "unknown param(s) 'node_cout'; the DAG's params are kai_ref, node_count, runner_tag, scenarios"
    )
    assert test_airflow.get(f"/dags/{DAG_ID}/dagRuns")["total_entries"] == runs_before


@pytest.mark.timeout(1500)
def test_clearing_a_failed_scenario_reruns_only_it(test_airflow: AirflowApi) -> None:
    api = test_airflow
    run_id = trigger(api, {"node_count": 10})
    assert _wait_finished(api, run_id, "the first run") == "failed"
    first = _task_instances(api, run_id)
    assert (first["run_flaky"]["state"], first["run_steady"]["state"]) == ("failed", "success")
    # The scheduler ran them one at a time, in the order of their names (README, Reliability).
    flaky_end, steady_start = first["run_flaky"]["end_date"], first["run_steady"]["start_date"]
    assert datetime.fromisoformat(flaky_end) <= datetime.fromisoformat(steady_start), (
        flaky_end,
        steady_start,
    )
    pipeline_run_id = _summary(api, run_id)["run_id"]
    before = published_run(pipeline_run_id)
    assert [(e["status"], e["airflow_run_id"]) for e in before["entries"]] == [("failure", run_id)]
    assert _test_statuses(before)["flaky"] == "failure", "the failed scenario appears by name"

    cleared = api.request(
        "POST",
        f"/dags/{DAG_ID}/clearTaskInstances",
        json={
            "dag_run_id": run_id,
            "task_ids": ["run_flaky"],
            "include_downstream": True,
            "only_failed": False,
            "reset_dag_runs": True,
            "dry_run": False,
        },
    )
    assert cleared.status_code == 200, cleared.text
    cleared_ids = {ti["task_id"] for ti in cleared.json()["task_instances"]}
    assert "run_steady" not in cleared_ids
    assert {
        "run_flaky",
        "collect_metrics",
        "publish_results",
        "tear_down_environment",
        "setup.check_cluster",
    } <= cleared_ids

    def rerun_finished() -> bool:
        tis = _task_instances(api, run_id)
        return tis["run_flaky"]["try_number"] == 2 and _run_state(api, run_id) in FINISHED

    wait_for(rerun_finished, timeout=900, what="the cleared scenario's second try", interval=3)
    assert _run_state(api, run_id) == "success"
    second = _task_instances(api, run_id)
    assert (second["run_flaky"]["state"], second["run_flaky"]["try_number"]) == ("success", 2)
    assert (second["run_steady"]["state"], second["run_steady"]["try_number"]) == ("success", 1)
    assert second["setup.wait_for_nodes"]["try_number"] == 2, "the setup re-ran before the retry"
    assert second["tear_down_environment"]["state"] == "success"

    summary = _summary(api, run_id)
    by_name = {entry["scenario"]: entry for entry in summary["scenarios"]}
    assert (by_name["flaky"]["status"], by_name["flaky"]["try_number"]) == ("success", 2)
    assert (by_name["steady"]["status"], by_name["steady"]["try_number"]) == ("success", 1)
    stored = boto3.client("s3").get_object(
        Bucket=localenv_settings.DEFAULT_BUCKET, Key=f"runs/{summary['run_id']}/run-summary.json"
    )
    assert json.loads(stored["Body"].read())["status"] == "success"

    after = published_run(pipeline_run_id)
    (entry,) = after["entries"]
    assert (entry["status"], entry["path"]) == ("success", before["entries"][0]["path"]), "updated in place"
    statuses = _test_statuses(after)
    assert "flaky" not in statuses, "the failure entry is gone: replaced by the new try's results"
    assert statuses["Fill Cluster with single GPU Jobs"] == "success", "flaky's suite entry, second try"
    for disabled in ("slow", "brief"):
        assert statuses.pop(disabled) == "skipped", f"{disabled} is not selected by default (enabled: false)"
    assert set(statuses.values()) == {"success"}
    assert (
        after["metrics"]["scenarios"]["flaky"]["window"] != before["metrics"]["scenarios"]["flaky"]["window"]
    )


@pytest.mark.timeout(1200)
def test_a_killed_worker_pod_is_retried_onto_the_running_runner_pod(
    test_airflow: AirflowApi, core: client.CoreV1Api
) -> None:
    """The worker pod of ``slow`` is killed while its runner runs; nothing else is touched.

    The scheduler fails the task when its pod is gone and retries it in a new worker pod; that try
    reattaches to the runner pod of the first (the provider's durable pod identity) instead of starting
    a second runner, and the run is published with that pod's outputs.
    """
    api = test_airflow
    run_id = trigger(api, {"node_count": 10, "scenarios": ["slow"]})
    first = _wait_for_runner(core, "slow")
    worker = wait_for(lambda: _worker_pod(core, "run_slow"), timeout=60, what="run_slow's worker pod")
    core.delete_namespaced_pod(worker.metadata.name, NAMESPACE, grace_period_seconds=0)

    assert _wait_finished(api, run_id, "the run after its worker pod was killed") == "success"
    slow = _task_instances(api, run_id)["run_slow"]
    assert (slow["state"], slow["try_number"]) == ("success", 2)
    assert slow["hostname"] != worker.metadata.name, "the retry ran in a worker pod of its own"
    log = _log(api, run_id, "run_slow", 2)
    assert f"Reconnecting to pod {first.metadata.namespace}/{first.metadata.name}" in log
    assert "reattached to the runner of try 1" in log
    (entry,) = [e for e in _summary(api, run_id)["scenarios"] if e["scenario"] == "slow"]
    assert (entry["status"], entry["try_number"]) == ("success", 1), "the outputs of the pod of try 1"


@pytest.mark.timeout(1200)
def test_a_killed_scheduler_pod_loses_nothing(test_airflow: AirflowApi, core: client.CoreV1Api) -> None:
    """The scheduler's pod is killed while ``slow`` runs; the worker pod goes on.

    The Deployment starts another scheduler, which adopts the running worker pod: the task finishes
    in its first try and the run is published once.
    """
    api = test_airflow
    run_id = trigger(api, {"node_count": 10, "scenarios": ["slow"]})
    wait_for(
        lambda: _runner(core, "slow", {"Running"}), timeout=600, what="slow's runner pod to run", interval=1
    )
    (scheduler,) = core.list_namespaced_pod(NAMESPACE, label_selector="component=scheduler").items
    core.delete_namespaced_pod(scheduler.metadata.name, NAMESPACE, grace_period_seconds=0)

    assert _wait_finished(api, run_id, "the run after the scheduler pod was killed") == "success"
    slow = _task_instances(api, run_id)["run_slow"]
    assert (slow["state"], slow["try_number"]) == ("success", 1)
    (now,) = core.list_namespaced_pod(NAMESPACE, label_selector="component=scheduler").items
    assert now.metadata.name != scheduler.metadata.name
    published = published_run(_summary(api, run_id)["run_id"])
    assert [e["status"] for e in published["entries"]] == ["success"], "one manifest entry"


@pytest.mark.timeout(1200)
def test_the_database_restarting_mid_scenario_loses_nothing(
    test_airflow: AirflowApi, core: client.CoreV1Api, local_env: LocalEnvironment
) -> None:
    """PostgreSQL stops for 20 s while ``slow`` runs, then starts again with its data."""
    api = test_airflow
    run_id = trigger(api, {"node_count": 10, "scenarios": ["slow"]})
    wait_for(
        lambda: _runner(core, "slow", {"Running"}), timeout=600, what="slow's runner pod to run", interval=1
    )
    database = local_env.postgres()
    database.stop()
    try:
        assert not database.answers()
        time.sleep(20)  # down for as long as a managed database's failover takes
    finally:
        database.start()

    state = _wait_finished(api, run_id, "the run after the database restarted")
    summary = _summary(api, run_id)
    (entry,) = [e for e in summary["scenarios"] if e["scenario"] == "slow"]
    assert (state, entry["status"]) == ("success", "success"), summary
    published = published_run(summary["run_id"])
    assert [e["status"] for e in published["entries"]] == ["success"], "one manifest entry"


@pytest.mark.timeout(1200)
def test_a_runner_that_finished_while_its_worker_was_lost_is_adopted_not_rerun(
    test_airflow: AirflowApi, core: client.CoreV1Api, local_env: LocalEnvironment
) -> None:
    """``brief``'s worker pod is lost with the scheduler down; both come back after its runner finished.

    The retry finds the finished pod of try 1 and takes its outputs: no second runner measures the
    scenario again, so try 2 uploads nothing.
    """
    api = test_airflow
    run_id = trigger(api, {"node_count": 10, "scenarios": ["brief"]})
    first = _wait_for_runner(core, "brief")
    worker = wait_for(lambda: _worker_pod(core, "run_brief"), timeout=60, what="run_brief's worker pod")
    local_env.kubectl("-n", NAMESPACE, "scale", "deployment/airflow-scheduler", "--replicas=0")
    try:
        core.delete_namespaced_pod(worker.metadata.name, NAMESPACE, grace_period_seconds=0)
        wait_for(
            lambda: _runner(core, "brief", {"Succeeded"}),
            timeout=BRIEF_SECONDS + 120,
            what="brief's runner to finish",
            interval=1,
        )
    finally:
        local_env.kubectl("-n", NAMESPACE, "scale", "deployment/airflow-scheduler", "--replicas=1")

    assert _wait_finished(api, run_id, "the run after the runner was adopted") == "success"
    brief = _task_instances(api, run_id)["run_brief"]
    assert (brief["state"], brief["try_number"]) == ("success", 2)
    log = _log(api, run_id, "run_brief", 2)
    assert f"the runner of try 1 ({first.metadata.name}) finished while its worker was lost" in log
    summary = _summary(api, run_id)
    (entry,) = [e for e in summary["scenarios"] if e["scenario"] == "brief"]
    assert (entry["status"], entry["try_number"]) == ("success", 1), "the outputs of the pod of try 1"
    second_try = boto3.client("s3").list_objects_v2(
        Bucket=localenv_settings.DEFAULT_BUCKET, Prefix=f"runs/{summary['run_id']}/scenarios/brief/try-2/"
    )
    assert second_try.get("KeyCount", 0) == 0, "no second runner measured the scenario"
