"""Retrying one failed scenario through Airflow's REST API.

A real api-server, scheduler and dag-processor run the nightly DAG on the local environment, on a
metadata database of their own on the local PostgreSQL. A
``flaky`` scenario (the stand-in suite in mode fail-once) fails on its first try while ``steady``
succeeds; clearing ``run_flaky`` re-runs it, its setup, metrics, publishing and teardown, and not
``steady``; the published run then holds the new result in place of the failed one. A ``slow``
scenario (not enabled by default) runs while the scheduler and its workers are killed: the restarted
scheduler retries the task, which reattaches to the runner pod instead of starting a second one.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from kubernetes import client

from kai_scale_model import labels
from localenv import settings as localenv_settings
from localenv.environment import LocalEnvironment
from tests.integration.airflow_env import (
    DAG_ID,
    include_dir_with,
    own_database,
    published_run,
    standin_scenario,
    workload_scenario,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("kai", "airflow_on_local_env")
AIRFLOW = str(Path(sys.executable).parent / "airflow")
# Long enough to outlive the killed scheduler's detection (~30 s) and the retry's start.
SLOW_SECONDS = 120
# Long enough to kill the scheduler while it runs; it then finishes while no scheduler is up.
BRIEF_SECONDS = 30


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AirflowServices:
    """api-server, scheduler and dag-processor on a fresh metadata database, stopped on ``stop``."""

    def __init__(self, *, home: Path, env: dict[str, str]) -> None:
        self.home = home
        self.env = env
        self.port = int(env["AIRFLOW__API__PORT"])
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        subprocess.run([AIRFLOW, "db", "migrate"], env=self.env, check=True, capture_output=True, timeout=300)
        for component in (["api-server", "--port", str(self.port)], ["scheduler"], ["dag-processor"]):
            self._start(component)

    def _start(self, component: list[str]) -> None:
        with (self.home / f"{component[0]}.log").open("ab") as log:
            self.processes[component[0]] = subprocess.Popen(
                [AIRFLOW, *component],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def restart_scheduler_killing_its_workers(self) -> None:
        """Kill the scheduler as when its machine dies, then start a new one."""
        self.kill_scheduler_and_its_workers()
        self.start_scheduler()

    def kill_scheduler_and_its_workers(self) -> None:
        """SIGKILL to every process of the scheduler's session: its LocalExecutor's workers, their tasks."""
        scheduler = self.processes.pop("scheduler")
        for pid in _session_members(scheduler.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        scheduler.wait()

    def start_scheduler(self) -> None:
        """Start a scheduler (and its LocalExecutor) again."""
        self._start(["scheduler"])

    def stop(self) -> None:
        for process in self.processes.values():
            process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in self.home.glob("*.log")
        )


def _session_members(session: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session:  # the fields after the name: state, ppid, pgrp, session
            members.append(int(stat.parent.name))
    return members


@pytest.fixture(scope="module")
def airflow_services(
    local_env: LocalEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AirflowServices]:
    """A running Airflow whose nightly DAG has scenarios ``flaky``, ``steady`` and ``slow``."""
    home = tmp_path_factory.mktemp("airflow-services")
    marker = f"flaky-failed-once-{secrets.token_hex(4)}"  # a namespace: it outlives the first pod
    include = include_dir_with(
        home,
        {
            "flaky": standin_scenario("fail-once", STANDIN_MARKER=marker),
            "steady": workload_scenario(),
            "slow": {**standin_scenario("slow", STANDIN_SECONDS=str(SLOW_SECONDS)), "enabled": False},
            "brief": {**standin_scenario("slow", STANDIN_SECONDS=str(BRIEF_SECONDS)), "enabled": False},
        },
    )
    port = _free_port()
    env = {
        **os.environ,
        **local_env.exports(),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": own_database(local_env, "airflow_rest_tests"),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "KAI_SCALE_INCLUDE_DIR": str(include),
        "KAI_SCALE_RETRY_DELAY_SECONDS": "1",
        "KAI_SCALE_SCHEDULE": "none",  # only the runs the test triggers
        # A killed scheduler's tasks are reset by the next one once it counts the old one dead
        # (health check threshold) at its next orphan check: seconds here, rather than 5 minutes.
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "20",
        "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "10",
    }
    services = AirflowServices(home=home, env=env)
    services.start()
    try:
        yield services
    finally:
        services.stop()
        local_env.kubectl("delete", "namespace", marker, "--ignore-not-found", "--wait=false")


@pytest.fixture(scope="module")
def airflow_api(airflow_services: AirflowServices) -> Iterator[httpx.Client]:
    """A REST client of the running Airflow, once it serves the parsed nightly DAG."""
    with httpx.Client(base_url=f"http://127.0.0.1:{airflow_services.port}/api/v2", timeout=30) as api:

        def dag_parsed() -> bool:
            try:
                return api.get(f"/dags/{DAG_ID}").status_code == 200
            except httpx.TransportError:
                return False

        try:
            wait_for(
                dag_parsed, timeout=240, what="the api-server to serve the parsed nightly DAG", interval=2
            )
        except AssertionError as error:
            raise AssertionError(f"{error}\n{airflow_services.logs()}") from error
        yield api


def _trigger(api: httpx.Client, conf: dict[str, Any]) -> httpx.Response:
    return api.post(f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": conf})


def _run_state(api: httpx.Client, run_id: str) -> str:
    return str(api.get(f"/dags/{DAG_ID}/dagRuns/{run_id}").json()["state"])


def _task_instances(api: httpx.Client, run_id: str) -> dict[str, dict[str, Any]]:
    listing = api.get(f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances", params={"limit": 100}).json()
    return {ti["task_id"]: ti for ti in listing["task_instances"]}


def test_clearing_a_failed_scenario_reruns_only_it(airflow_api: httpx.Client) -> None:
    response = _trigger(airflow_api, {"node_count": 10})
    assert response.status_code == 200, response.text
    run_id = response.json()["dag_run_id"]
    finished = {"success", "failed"}
    wait_for(
        lambda: _run_state(airflow_api, run_id) in finished, timeout=600, what="the first run", interval=3
    )
    first = _task_instances(airflow_api, run_id)
    assert _run_state(airflow_api, run_id) == "failed", [
        (k, v["state"]) for k, v in first.items() if k.startswith("run")
    ]
    assert (first["run_flaky"]["state"], first["run_steady"]["state"]) == ("failed", "success")
    # The scheduler ran them one at a time, in the order of their names (docs/reliability.md).
    flaky_end, steady_start = first["run_flaky"]["end_date"], first["run_steady"]["start_date"]
    assert datetime.fromisoformat(flaky_end) <= datetime.fromisoformat(steady_start), (
        flaky_end,
        steady_start,
    )
    pipeline_run_id = _summary(airflow_api, run_id)["run_id"]
    before = published_run(pipeline_run_id)
    assert [(e["status"], e["airflow_run_id"]) for e in before["entries"]] == [("failure", run_id)]
    assert _test_statuses(before)["flaky"] == "failure", "the failed scenario appears by name"

    cleared = airflow_api.post(
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
        tis = _task_instances(airflow_api, run_id)
        return tis["run_flaky"]["try_number"] == 2 and _run_state(airflow_api, run_id) in finished

    wait_for(rerun_finished, timeout=600, what="the cleared scenario's second try", interval=3)
    assert _run_state(airflow_api, run_id) == "success"
    second = _task_instances(airflow_api, run_id)
    assert (second["run_flaky"]["state"], second["run_flaky"]["try_number"]) == ("success", 2)
    assert (second["run_steady"]["state"], second["run_steady"]["try_number"]) == ("success", 1)
    assert second["setup.wait_for_nodes"]["try_number"] == 2, "the setup re-ran before the retry"
    assert second["tear_down_environment"]["state"] == "success"

    summary = _summary(airflow_api, run_id)
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


def _summary(airflow_api: httpx.Client, run_id: str) -> dict[str, Any]:
    value = airflow_api.get(
        f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/publish_results/xcomEntries/run_summary",
        params={"deserialize": True},
    ).json()["value"]
    return dict(value if isinstance(value, dict) else json.loads(value))


def _test_statuses(published: dict[str, Any]) -> dict[str, str]:
    return {test["test_name"]: test["status"] for test in published["results"]["results"]["tests"]}


def test_a_killed_worker_is_retried_onto_the_running_runner_pod(
    airflow_api: httpx.Client, airflow_services: AirflowServices, core: client.CoreV1Api
) -> None:
    """The scheduler and its LocalExecutor workers die while ``slow`` runs; nothing else is touched.

    The restarted scheduler resets the dead one's task and runs it again; that try reattaches to
    the runner pod of the first (the provider's durable pod identity) instead of starting a second
    runner, and the run is published with that pod's outputs.
    """
    response = _trigger(airflow_api, {"node_count": 10, "scenarios": ["slow"]})
    assert response.status_code == 200, response.text
    run_id = response.json()["dag_run_id"]
    selector = f"{labels.SCENARIO}=slow,{labels.ROLE}=runner"

    def running_runner() -> client.V1Pod | None:
        pods = core.list_pod_for_all_namespaces(label_selector=selector).items
        return next((p for p in pods if p.status.phase == "Running"), None)

    first = wait_for(running_runner, timeout=300, what="the slow scenario's runner pod to run", interval=1)
    airflow_services.restart_scheduler_killing_its_workers()

    def finished() -> bool:
        return _run_state(airflow_api, run_id) in {"success", "failed"}

    wait_for(finished, timeout=600, what="the run to finish after the worker was killed", interval=3)
    slow = _task_instances(airflow_api, run_id)["run_slow"]
    assert (_run_state(airflow_api, run_id), slow["state"], slow["try_number"]) == ("success", "success", 2)
    log = airflow_api.get(
        f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/run_slow/logs/2", params={"full_content": True}
    ).text
    assert f"Reconnecting to pod {first.metadata.namespace}/{first.metadata.name}" in log
    assert "reattached to the runner of try 1" in log
    (entry,) = [e for e in _summary(airflow_api, run_id)["scenarios"] if e["scenario"] == "slow"]
    assert (entry["status"], entry["try_number"]) == ("success", 1), "the outputs of the pod of try 1"


def test_a_runner_that_finished_while_its_worker_was_lost_is_adopted_not_rerun(
    airflow_api: httpx.Client, airflow_services: AirflowServices, core: client.CoreV1Api
) -> None:
    """The scheduler dies while ``brief`` runs and comes back only after the runner pod finished.

    The retry finds the finished pod of try 1 and takes its outputs: no second runner measures
    the scenario again, so try 2 uploads nothing.
    """
    response = _trigger(airflow_api, {"node_count": 10, "scenarios": ["brief"]})
    assert response.status_code == 200, response.text
    run_id = response.json()["dag_run_id"]
    selector = f"{labels.SCENARIO}=brief,{labels.ROLE}=runner"

    def runner_in(phases: set[str]) -> client.V1Pod | None:
        pods = core.list_pod_for_all_namespaces(label_selector=selector).items
        return next((p for p in pods if p.status.phase in phases), None)

    first = wait_for(
        lambda: runner_in({"Running"}), timeout=300, what="brief's runner pod to run", interval=1
    )
    airflow_services.kill_scheduler_and_its_workers()
    wait_for(
        lambda: runner_in({"Succeeded"}),
        timeout=BRIEF_SECONDS + 120,
        what="brief's runner to finish",
        interval=1,
    )
    airflow_services.start_scheduler()

    wait_for(
        lambda: _run_state(airflow_api, run_id) in {"success", "failed"},
        timeout=600,
        what="the run to finish after the runner was adopted",
        interval=3,
    )
    brief = _task_instances(airflow_api, run_id)["run_brief"]
    assert (_run_state(airflow_api, run_id), brief["state"], brief["try_number"]) == ("success", "success", 2)
    log = airflow_api.get(
        f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/run_brief/logs/2", params={"full_content": True}
    ).text
    assert f"the runner of try 1 ({first.metadata.name}) finished while its worker was lost" in log
    (entry,) = [e for e in _summary(airflow_api, run_id)["scenarios"] if e["scenario"] == "brief"]
    assert (entry["status"], entry["try_number"]) == ("success", 1), "the outputs of the pod of try 1"
    pipeline_run_id = _summary(airflow_api, run_id)["run_id"]
    s3 = boto3.client("s3")
    second_try = s3.list_objects_v2(
        Bucket=localenv_settings.DEFAULT_BUCKET, Prefix=f"runs/{pipeline_run_id}/scenarios/brief/try-2/"
    )
    assert second_try.get("KeyCount", 0) == 0, "no second runner measured the scenario"
