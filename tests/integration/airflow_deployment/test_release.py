"""Airflow as its users run it, on a bare cluster: the release, its REST API, and KAI's real suite on it.

Airflow is the official chart 1.21.0 as its maintainers ship it, with deploy/airflow/values.yaml and
the local overlay: api-server, scheduler, dag-processor, triggerer and statsd on the system node, the
metadata database in the local PostgreSQL outside the cluster, KubernetesExecutor worker pods, task
logs in S3. Each night is triggered through the deployed api-server's REST API, as make demo does
(nights.py).

The cluster is bare (conftest.py): the first night's setup installs KWOK, kwok-operator, the fake GPU
operator and the monitoring stack from their pinned sources (the local mirror), the second finds them.
The deployed api-server refuses bad confs: bad values by Airflow's own check of the params, an unknown
key by the plugin's trigger guard.

The first night meets what a deployment meets (docs/reliability.md): the scheduler and the worker of
``sanity-fill-cluster`` are killed (SIGKILL to their processes) while its runner runs, and a scheduler
comes back only once that runner finished: the retry adopts its outputs. Then the worker of
``whole-gpu-pending-background`` is killed while its runner runs (the retry reattaches to it) and
PostgreSQL is restarted while the retry waits. The second night's own tests: test_standin_night.py.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from kubernetes import client

from kai_scale.metrics.profile import load_profile
from kai_scale.object_keys import published_keys, scenario_outputs
from kai_scale.operators.scenario_pod import scenario_task_id
from kai_scale.profiles.collection import PROFILE_TYPES
from kai_scale.profiles.pprof import decode_profile
from kai_scale.profiles.summary import function_values, summarize
from kai_scale.settings import DEFAULT_RUNNER_IMAGE
from kai_scale.views.plugin import URL_PREFIX as VIEW_PREFIX
from localenv import settings as localenv_settings
from localenv.airflow import RELEASE as AIRFLOW_RELEASE
from localenv.airflow import AirflowDeployment
from localenv.airflow_api import AirflowApi
from localenv.airflow_values import NAMESPACE
from localenv.demo import DAG_ID, bucket_keys, profiles_line, run_path, wait_for_dag
from localenv.environment import LocalEnvironment
from localenv.kai import RELEASE
from localenv.node_config import SYSTEM_NODE_LABEL
from localenv.processes import ComponentError
from tests.alert_receivers import AlertReceivers, html_body, text_of
from tests.conftest import REPO
from tests.integration.airflow_deployment.cluster_state import (
    INFRASTRUCTURE_DEPLOYMENTS,
    INFRASTRUCTURE_RELEASES,
    BareCluster,
    release_statuses,
    releases,
)
from tests.integration.airflow_deployment.nights import (
    ADOPTED,
    ALL_SCENARIOS,
    FIRST_NIGHT,
    NODE_COUNT,
    NOTHING_LEFT,
    REATTACHED,
    RECIPIENTS,
    RESULTS_PREFIX,
    RUN_ALERT_AFTER,
    RUN_ALERT_AFTER_SECONDS,
    Night,
    airflow_pods,
    alerts_of,
)
from tests.integration.airflow_env import logged_task_ids, published_run, read_json
from tests.waiting import wait_for

pytestmark = [pytest.mark.restarts_local_env, pytest.mark.usefixtures("s3_from_this_machine")]

# The entries KAI's suite writes for each scenario's specs (test/e2e/scale/kwok_test.go).
SUITE_TESTS = {
    "sanity-fill-cluster": {
        "Fill Cluster with single GPU Jobs",
        "Fill Cluster with single GPU Jobs - scheduler is running while submitting jobs",
    },
    "whole-gpu-pending-background": {
        "Fill Cluster with single GPU Jobs with 400 pending tasks in background",
    },
}
# A Go duration as KAI's suite writes it (time.Duration's String()), e.g. "1m2.5s" or "13.3s".
GO_DURATION = re.compile(r"^(\d+h)?(\d+m)?\d+(\.\d+)?(s|ms|µs|ns)$")
# The Go module of KAI's scheduler: its functions' names begin with it.
KAI_MODULE = "github.com/kai-scheduler/KAI-scheduler/"
# The trend view's browser libraries and a size below each one's built file (make view-assets).
BUILT_LIBRARIES = {"echarts.min.js": 500_000, "d3.min.js": 200_000, "d3-flamegraph.min.js": 10_000}


@pytest.mark.timeout(1200)
def test_the_chart_runs_airflow_on_the_system_node_with_the_database_outside(
    airflow_deployment: AirflowDeployment, core: client.CoreV1Api, local_env: LocalEnvironment
) -> None:
    for component in ("api-server", "scheduler", "dag-processor", "triggerer", "statsd"):
        (pod,) = airflow_pods(core, component)
        assert pod.status.phase == "Running", component
        assert pod.spec.node_selector == {SYSTEM_NODE_LABEL: "system"}, component
    (scheduler,) = airflow_pods(core, "scheduler")
    image = local_env.built_images().airflow_image
    assert scheduler.spec.containers[0].image == image, "the image built from docker/airflow/Dockerfile"
    config_map = core.read_namespaced_config_map("airflow-config", NAMESPACE).data["airflow.cfg"]
    assert "executor = KubernetesExecutor" in config_map
    # Airflow's tables are in the PostgreSQL this machine runs, not in a file of a pod.
    assert int(local_env.postgres().query("SELECT count(*) FROM alembic_version")) == 1


def test_values_the_chart_refuses_stop_the_deploy_naming_them_and_change_nothing(
    airflow_deployment: AirflowDeployment, local_env: LocalEnvironment, tmp_path: Path
) -> None:
    """A team's values file with a setting of the wrong type, refused by the chart's values.schema.json."""
    team = tmp_path / "values-team.yaml"
    team.write_text("scheduler:\n  replicas: one\n")
    revision = releases(local_env)[AIRFLOW_RELEASE]
    with_team_values = AirflowDeployment(local_env, values=(*airflow_deployment.values, team))
    with pytest.raises(ComponentError) as refused:
        with_team_values.deploy(airflow_deployment.overrides)
    said = str(refused.value)
    assert said.startswith(
        "airflow: the chart 1.21.0 refuses the values of deploy/airflow/values.yaml, "
        f"deploy/airflow/values-local.yaml, {team}, "
    ), said
    assert ": at '/scheduler/replicas': got string, want integer (release unchanged; " in said
    assert releases(local_env)[AIRFLOW_RELEASE] == revision
    assert airflow_deployment.deploy(airflow_deployment.overrides) is False, "the release is as it was"


@pytest.mark.timeout(1500)  # the services' recovery from the database's absence takes minutes
def test_an_upgrade_that_cannot_reach_the_database_stops_naming_the_failing_pod_and_its_log(
    airflow_deployment: AirflowDeployment, local_env: LocalEnvironment, core: client.CoreV1Api
) -> None:
    """PostgreSQL down during an upgrade (a new setting of the api-server's).

    Airflow's services exit within seconds of losing their database: the deploy stops at the first
    container that failed again after its restart, naming it and its last log lines, instead of waiting out
    helm's 15 minutes for the migration job. The release is marked failed; with the database back and
    the services up again, the next deploy upgrades it.
    """
    upgrade = dataclasses.replace(
        airflow_deployment.overrides, component_env={"apiServer": {"KAI_SCALE_UPGRADE_TEST": "database down"}}
    )
    database = local_env.postgres()
    database.stop()
    try:
        with pytest.raises(ComponentError) as stopped:
            airflow_deployment.deploy(upgrade)
    finally:
        database.start()
    said = str(stopped.value)
    named = r"airflow: airflow-[-\w]+/[-\w]+ failed during helm's install or upgrade; helm was stopped"
    assert re.match(named, said), said
    port = local_env.config.ports.postgres
    assert f'connection to server at "{local_env.config.pod_network.gateway}", port {port} failed' in said
    assert release_statuses(local_env)[AIRFLOW_RELEASE] == "failed"
    wait_for(lambda: _all_ready(core), timeout=600, what="Airflow's services to come back with the database")
    assert airflow_deployment.deploy(upgrade) is True


def _all_ready(core: client.CoreV1Api) -> bool:
    """Whether every pod of the release but its finished jobs has all its containers ready."""
    for pod in core.list_namespaced_pod(NAMESPACE).items:
        if pod.status.phase == "Succeeded" or pod.metadata.deletion_timestamp is not None:
            continue
        if not all(status.ready for status in pod.status.container_statuses or []):
            return False
    return True


def _trigger(api: AirflowApi, conf: dict[str, Any]) -> httpx.Response:
    return api.request("POST", f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": conf})


@pytest.mark.parametrize(
    ("conf", "field"),
    [({"node_count": 0}, "node_count"), ({"node_count": 10, "scenarios": ["no-such-scenario"]}, "scenarios")],
)
def test_bad_params_are_refused_at_trigger(airflow_api: AirflowApi, conf: dict[str, Any], field: str) -> None:
    """Airflow's own check of the DAG's params, in the deployed api-server."""
    wait_for_dag(airflow_api)
    response = _trigger(airflow_api, conf)
    assert response.status_code == 400, response.text
    assert field in response.text


def test_an_unknown_param_is_refused_at_trigger_naming_it(airflow_api: AirflowApi) -> None:
    """The plugin's trigger guard, in the deployed api-server.

    Airflow itself would start the run with the key ignored (500 nodes for a typo of node_count).
    """
    wait_for_dag(airflow_api)
    runs_before = airflow_api.get(f"/dags/{DAG_ID}/dagRuns")["total_entries"]
    response = _trigger(airflow_api, {"node_cout": 50})
    assert response.status_code == 400, response.text
    assert response.json()["detail"] == (
        "unknown param(s) 'node_cout'; the DAG's params are kai_ref, node_count, runner_tag, scenarios"
    )
    assert airflow_api.get(f"/dags/{DAG_ID}/dagRuns")["total_entries"] == runs_before


@pytest.mark.timeout(1200)  # two upgrades, each waiting for the dag-processor's rollout
def test_a_dag_file_that_does_not_import_stops_the_demo_naming_the_cause(
    airflow_deployment: AirflowDeployment, airflow_api: AirflowApi
) -> None:
    """A deployment setting the pipeline refuses, read when the dag-processor imports the DAG file.

    The same path as an image without the pipeline's provider (``ModuleNotFoundError: No module named
    'kai_scale'``): the DAG of the release before stays listed, so the demo would trigger it; it stops
    instead at the import error recorded since the upgrade, naming its cause.
    """
    tuned = airflow_deployment.overrides
    # The dag-processor's own setting: the upgrade restarts it alone.
    refused_setting = {"dagProcessor": {"KAI_SCALE_ALERT_EMAIL_FROM": "the KAI scale bot"}}
    refused = dataclasses.replace(tuned, component_env={**tuned.component_env, **refused_setting})
    try:
        assert airflow_deployment.deploy(refused) is True
        with pytest.raises(ComponentError) as stopped:
            wait_for_dag(airflow_api, since=datetime.now(UTC))  # the release before is gone
    finally:
        airflow_deployment.deploy(tuned)
        restored = datetime.now(UTC)
    said = str(stopped.value)
    assert said.startswith("airflow: the DAG file does not import in the deployment: "), said
    assert f"{DAG_ID}.py: " in said
    assert "KAI_SCALE_ALERT_EMAIL_FROM must be mail addresses like ops@example.com" in said
    wait_for_dag(airflow_api, since=restored)


@pytest.mark.timeout(3600)  # both nights
def test_the_first_night_sets_up_the_bare_cluster_and_the_second_finds_its_setup(
    bare_cluster: BareCluster, first_night: Night, second_night: Night, local_env: LocalEnvironment
) -> None:
    assert bare_cluster.infrastructure == {}, "a bare cluster: nothing of the pipeline's setup installed"
    first, second = first_night, second_night
    first_id, second_id = first.pipeline_run_id, second.pipeline_run_id
    assert set(first.infrastructure) == {f"release/{name}" for name in INFRASTRUCTURE_RELEASES} | {
        f"deployment/{name}" for name in INFRASTRUCTURE_DEPLOYMENTS
    }
    assert second.infrastructure == first.infrastructure, "the same objects at the same revisions: kept"
    assert releases(local_env)[RELEASE] == bare_cluster.kai_revision, "KAI's release is the admin's"
    assert first_id != second_id
    published = published_run(second_id)
    assert [run["run_id"] for run in published["manifest_runs"]] == [first_id, second_id], "history kept"


def test_a_lost_worker_is_retried_onto_its_runner_pod_and_nothing_is_measured_twice(
    airflow_api: AirflowApi, first_night: Night
) -> None:
    """The first night's lost workers: each retry took the outputs of the runner of try 1.

    ADOPTED's runner finished while no scheduler ran: its outputs adopted. REATTACHED's still ran: the
    retry reattached to it, and PostgreSQL restarting meanwhile lost nothing (one manifest entry, the
    suite's results as written: test_the_first_night_runs_kais_suite_and_publishes_it).
    """
    first = first_night
    tries = {entry["scenario"]: entry["try_number"] for entry in first.summary["scenarios"]}
    s3 = boto3.client("s3")  # endpoint and credentials from the AWS_* variables of the local environment
    # One at a time, in the order of their names (docs/reliability.md), the retries included.
    adopted_task, reattached_task = (
        first.instances[scenario_task_id(name)] for name in (ADOPTED, REATTACHED)
    )
    assert adopted_task["end_date"] <= reattached_task["start_date"]
    for scenario in first.lost_runners:
        task = first.instances[scenario_task_id(scenario)]
        assert (task["state"], task["try_number"]) == ("success", 2), scenario
        assert tries[scenario] == 1, f"{scenario}: the outputs of the runner of try 1"
        second_try = s3.list_objects_v2(
            Bucket=localenv_settings.DEFAULT_BUCKET,
            Prefix=f"runs/{first.pipeline_run_id}/scenarios/{scenario}/try-2/",
        )
        assert second_try.get("KeyCount", 0) == 0, f"{scenario}: no second runner measured it"
    log = _task_log(airflow_api, first.run_id, ADOPTED, try_number=2)
    adopted = first.lost_runners[ADOPTED].metadata.name
    assert f"the runner of try 1 ({adopted}) finished while its worker was lost" in log
    log = _task_log(airflow_api, first.run_id, REATTACHED, try_number=2)
    runner = first.lost_runners[REATTACHED].metadata
    assert f"Reconnecting to pod {runner.namespace}/{runner.name}" in log
    assert "reattached to the runner of try 1" in log


def _task_log(api: AirflowApi, run_id: str, scenario: str, *, try_number: int) -> str:
    """A scenario task's log of one try, as the UI shows it (read from S3 once the task ended)."""
    path = f"{run_path(run_id)}/taskInstances/{scenario_task_id(scenario)}/logs/{try_number}"
    answer = api.request("GET", path, params={"full_content": True})
    assert answer.status_code == 200, answer.text[:300]
    return answer.text


def test_each_task_runs_in_a_worker_pod_of_its_own_with_its_log_in_s3(
    core: client.CoreV1Api, first_night: Night
) -> None:
    """The scenarios not selected are skipped by the scheduler: no worker pod, no log."""
    night = first_night
    ran = [ti for ti in night.instances.values() if ti["state"] == "success"]
    hostnames = [ti["hostname"] for ti in ran]
    assert len(set(hostnames)) == len(ran), hostnames  # the pod's name is the task's hostname
    (scheduler,) = airflow_pods(core, "scheduler")
    assert scheduler.metadata.name not in hostnames
    unselected = {scenario_task_id(name) for name in ALL_SCENARIOS - set(night.scenarios)}
    assert {task: night.instances[task]["state"] for task in unselected} == dict.fromkeys(
        unselected, "skipped"
    )
    assert not [task for task in unselected if night.instances[task]["hostname"]], "no worker pod"
    # Every task's log is in S3 once its pod is gone, and no log holds a presigned URL's signature.
    logs = night.logs
    logged_tasks = logged_task_ids(logs)
    assert logged_tasks == {ti["task_id"] for ti in night.instances.values() if ti["hostname"]}
    assert not [key for key, text in logs.items() if "X-Amz-Signature" in text]
    assert "X-Amz-Signature" not in json.dumps(night.summary)


def test_the_deployed_api_server_serves_the_trend_view_with_its_chart_library(
    airflow_api: AirflowApi, first_night: Night
) -> None:
    """The image carries the view's assets (a checkout's `make view-assets` is not needed)."""
    summary = first_night.summary
    base = airflow_api.base_url
    page = f"{base}{VIEW_PREFIX}/runs"
    assert httpx.get(page, timeout=60).status_code == 401, "only who may read the DAG's runs"
    airflow_api.login()
    answer = httpx.get(page, headers={"Authorization": f"Bearer {airflow_api.token}"}, timeout=60)
    assert answer.status_code == 200, answer.text[:500]
    assert summary["run_id"] in answer.text
    assert "The chart libraries are not installed" not in answer.text
    # The image built them: Apache ECharts, D3 and d3-flame-graph (each well over these sizes).
    for library, size in BUILT_LIBRARIES.items():
        served = httpx.get(f"{base}{VIEW_PREFIX}/static/vendor/{library}", timeout=60)
        assert served.status_code == 200, library
        assert len(served.content) > size, library


def test_a_night_past_its_time_limit_is_alerted_by_the_deployed_triggerer(
    first_night: Night, alerts: AlertReceivers
) -> None:
    """The night ran longer than KAI_SCALE_RUN_ALERT_AFTER: its deadline's callbacks, one per channel.

    Run by the release's triggerer (Airflow's DeadlineAlert), while the night went on; the night
    succeeded, so no failure alert followed.
    """
    ((message, payload),) = alerts_of(alerts, first_night.run_id, event="overdue")
    assert re.fullmatch(
        rf"\[KAI scale\] run {re.escape(first_night.pipeline_run_id)} \({NODE_COUNT} nodes\) "
        rf"still running after \S+ \(limit {RUN_ALERT_AFTER}\)",
        message["Subject"],
    ), message["Subject"]
    assert message["To"] == RECIPIENTS
    assert payload["text"] == text_of(html_body(message)), "the webhook says what the mail says"
    assert payload["limit_seconds"] == RUN_ALERT_AFTER_SECONDS
    assert first_night.state == "success"
    posts = [post for _, _, post in alerts.webhook.posts if post["airflow_run_id"] == first_night.run_id]
    assert [post["event"] for post in posts] == ["overdue"], "no failure alert for a green night"


def test_the_pipeline_overhead_benchmark_reads_the_night(first_night: Night) -> None:
    """benchmarks/pipeline_overhead.py's smoke test, on the first night (--run-id: it starts none)."""
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "pipeline_overhead.py"), "--run-id", first_night.run_id],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for row in (
        "| sanity-fill-cluster (success): runner / task |",
        "| worker pod from queued to running, ",
        "| Airflow's pods' memory, peak during the run | ",
    ):
        assert row in result.stdout, result.stdout
    cells = [line.strip("|").split("|") for line in result.stdout.splitlines() if line.count("|") == 3]
    rows = {label.strip(" *"): value.strip(" *") for label, value in cells}
    wall = float(rows["whole run (the DAG run's start to end)"])
    upper = float(rows["overhead outside runner pods"])
    lower = float(rows["overhead outside the scenario tasks (a lower bound)"])
    assert 0 < lower <= upper < wall, result.stdout
    # Both workers were lost: their tasks held more than their last tries' durations.
    last_tries = sum(first_night.instances[scenario_task_id(name)]["duration"] for name in FIRST_NIGHT)
    assert wall - lower > last_tries, result.stdout


def test_the_profiling_cost_benchmark_reads_the_night(first_night: Night) -> None:
    """benchmarks/profiling_cost.py's smoke test: the first night's fill times, under ``local`` (--read)."""
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "profiling_cost.py"),
            "--read",
            f"local={first_night.run_id}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    rows = {line.split(" | ")[0]: line for line in lines}
    (night,) = [line for line in lines if line.startswith(f"| {first_night.run_id}")]
    assert night.startswith(f"| {first_night.run_id} | local | success | "), lines
    assert "—" not in night, "both fills measured"
    assert rows["| **mean ± sd**"].startswith("| **mean ± sd** | local | | "), result.stdout
    assert "(n=1)" in rows["| **mean ± sd**"]
    cost = rows["| **profiling's cost**"]
    assert cost.count("not measured: a profile without a fill") == 2, "no unprofiled run read"


def test_the_first_night_runs_kais_suite_and_publishes_it(
    first_night: Night, local_env: LocalEnvironment
) -> None:
    """What the night published, as KAI's suite wrote it, and what it left behind."""
    scenarios, summary = first_night.scenarios, first_night.summary
    states = {task: ti["state"] for task, ti in first_night.instances.items()}
    assert first_night.state == "success", states
    for scenario in scenarios:
        assert states[scenario_task_id(scenario)] == "success"
    assert states["tear_down_environment"] == "success"
    published = published_run(first_night.pipeline_run_id)

    metadata = published["results"]["metadata"]
    assert metadata["kai_commit_hash"] == local_env.built_images().kai_commit, "the suite of KAI's build"
    pushed = local_env.registry().digest(f"{DEFAULT_RUNNER_IMAGE}:main")
    assert metadata["runner_image_ids"] == dict.fromkeys(scenarios, f"{DEFAULT_RUNNER_IMAGE}@{pushed}"), (
        "the runner image built from docker/runner/Dockerfile, with KAI's compiled suite"
    )
    assert metadata["kwok_node_count"] == NODE_COUNT
    built = local_env.built_images()
    kai_images = metadata["kai_images"]
    # What KAI's operator deployed, read from the cluster: every service, each of this build's images.
    assert {"kai-scheduler-default", "binder", "pod-grouper", "queue-controller"} <= set(kai_images), (
        kai_images
    )
    assert all(
        image.startswith(built.kai_image_repository) and image.endswith(f":{built.kai_image_tag}")
        for images in kai_images.values()
        for image in images
    ), kai_images
    assert metadata["kubernetes_version"] == "v1.34.4"
    results = published["results"]["results"]
    assert results["status"] == "success"
    skipped = {test["test_name"] for test in results["tests"] if test["status"] == "skipped"}
    assert skipped == ALL_SCENARIOS - set(scenarios), "the scenarios not selected, by name"
    suite_tests = set().union(*(SUITE_TESTS[scenario] for scenario in scenarios))
    tests = [test for test in results["tests"] if test["status"] != "skipped"]
    assert {test["test_name"] for test in tests} == suite_tests, "the suite's own entries"
    for test in tests:
        assert test["status"] == "success", test
        details = test["details"]
        assert (details["nodes"], details["jobs"]) == (NODE_COUNT, NODE_COUNT * 8), test
        assert GO_DURATION.match(details["time"]), f"the suite's own duration string: {test}"
    published_tests = {test["test_name"]: test for test in tests}
    for written in _suite_results_as_written(summary, scenarios, suite_tests):
        published_test = published_tests[written["test_name"]]
        assert {key: published_test.get(key) for key in written} == written, "as KAI's suite wrote it"
    its = [
        spec["State"]
        for suite in published["report"]
        for spec in suite["SpecReports"] or []
        if spec["LeafNodeType"] == "It"
    ]
    assert its.count("passed") == len(suite_tests), "Ginkgo's own report: one passed spec per entry"
    assert set(its) == {"passed", "skipped"}, "the focus skipped the other specs"

    profile = load_profile(REPO / "include" / "metrics" / "default.yaml")
    kai_metrics = [query.name for query in profile.queries if "kai_" in query.query]
    assert kai_metrics, "the metrics profile queries KAI's own metrics"
    for scenario in scenarios:
        metrics = published["metrics"]["scenarios"][scenario]
        assert metrics["status"] == "collected", scenario
        series = {name: metrics["metrics"][name]["series"] for name in kai_metrics}
        scraped = json.dumps(series)[:1000]
        assert all(series.values()), f"the real Prometheus scraped KAI in {scenario}: {scraped}"

    (entry,) = published["entries"]
    assert (entry["status"], entry["node_count"]) == ("success", NODE_COUNT)
    assert first_night.leftovers == NOTHING_LEFT, "its teardown removed its pool, nodes, pods, namespaces"


def test_the_first_night_publishes_kais_scheduler_profiles_of_each_scenario(
    first_night: Night, local_env: LocalEnvironment
) -> None:
    """Read from the Pyroscope the night's setup installed, where KAI's scheduler pushed them.

    Each file is the profile of KAI's scheduler (its functions in it) that its summary in results.json
    describes, as ``go tool pprof`` would open it; make demo's line names them.
    """
    published = published_run(first_night.pipeline_run_id)
    keys = published_keys(prefix=RESULTS_PREFIX, run_id=first_night.pipeline_run_id)
    s3 = boto3.client("s3")  # endpoint and credentials from the AWS_* variables of the local environment
    for scenario in first_night.scenarios:
        entry = published["results"]["profiles"][scenario]
        assert (entry["status"], entry["service"]) == ("collected", "kai-scheduler"), entry
        for name, collected in entry["profiles"].items():
            key = keys.beside(collected["file"])
            data = s3.get_object(Bucket=localenv_settings.DEFAULT_BUCKET, Key=key)["Body"].read()
            profile = decode_profile(data)
            summary = summarize(profile, PROFILE_TYPES[name].sample_type)
            assert summary.model_dump(mode="json") == collected["summary"], f"{scenario} {name}"
            assert summary.total > 0, f"{scenario} {name}"
            kais = [f for f in function_values(profile, summary.sample_type).cumulative if KAI_MODULE in f]
            assert kais, f"KAI's scheduler's own functions in its {name} profile of {scenario}"
    folder = f"{RESULTS_PREFIX}{first_night.pipeline_run_id}/"
    said = profiles_line(bucket_keys(local_env, f"{folder}profiles/"), folder=folder)
    for scenario in first_night.scenarios:
        assert f"{scenario}: alloc_space, cpu, inuse_space" in said, said


def _suite_results_as_written(
    summary: dict[str, Any], scenarios: tuple[str, ...], suite_tests: set[str]
) -> list[dict[str, Any]]:
    """The entries of each scenario's ``kwok_scale_test.json``, as the runner uploaded the suite's file."""
    written: list[dict[str, Any]] = []
    for entry in summary["scenarios"]:
        if entry["scenario"] in scenarios:
            key = scenario_outputs(
                run_id=summary["run_id"], scenario=entry["scenario"], try_number=entry["try_number"]
            ).suite_results
            written += read_json(key)["tests"]
    assert {test["test_name"] for test in written} == suite_tests, written
    return written
