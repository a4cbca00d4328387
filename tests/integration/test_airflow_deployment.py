"""The pipeline on Airflow as its users run it: the official chart in the local cluster.

The chart 1.21.0 as its maintainers ship it, with deploy/airflow/values.yaml and the local overlay:
api-server, scheduler, dag-processor, triggerer and statsd on the system node, the metadata database
in the local PostgreSQL outside the cluster, KubernetesExecutor worker pods, task logs in S3. The
nightly DAG is the one the image carries, triggered through the deployed api-server's REST API
and its api-server serves the trend view. test_retry_via_rest_api.py (the trigger guard, retries,
a lost worker) and test_trend_view.py (the browser) still run an Airflow of their own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import httpx
import pytest
from kubernetes import client

from kai_scale.views.plugin import URL_PREFIX as VIEW_PREFIX
from localenv import settings as localenv_settings
from localenv.airflow import NAMESPACE, TASK_LOGS_PREFIX, AirflowApi, AirflowDeployment
from localenv.demo import DAG_ID, follow, run_summary, task_instances, trigger, wait_for_dag
from localenv.environment import LocalEnvironment
from localenv.node import SYSTEM_NODE_LABEL
from tests.conftest import REPO
from tests.integration.airflow_env import published_run

pytestmark = pytest.mark.usefixtures("kai", "as_shipped", "s3_from_this_machine")


@pytest.fixture(scope="module")
def s3_from_this_machine(local_env: LocalEnvironment) -> Iterator[None]:
    """boto3 in this process reads the local bucket (the published run, the task logs)."""
    exports = local_env.exports()
    with pytest.MonkeyPatch.context() as patch:
        for name in (
            "AWS_ENDPOINT_URL_S3",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_DEFAULT_REGION",
        ):
            patch.setenv(name, exports[name])
        yield


@pytest.fixture(scope="module")
def as_shipped(airflow_deployment: AirflowDeployment) -> None:
    """The release with the repository's values and nothing else (another module may have overridden)."""
    airflow_deployment.deploy()


def _pods(core: client.CoreV1Api, component: str) -> list[client.V1Pod]:
    """The component's pods, less those of an earlier revision still shutting down."""
    pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"component={component}").items
    return [pod for pod in pods if pod.metadata.deletion_timestamp is None]


def test_the_chart_runs_airflow_on_the_system_node_with_the_database_outside(
    airflow_deployment: AirflowDeployment, core: client.CoreV1Api, local_env: LocalEnvironment
) -> None:
    for component in ("api-server", "scheduler", "dag-processor", "triggerer", "statsd"):
        (pod,) = _pods(core, component)
        assert pod.status.phase == "Running", component
        assert pod.spec.node_selector == {SYSTEM_NODE_LABEL: "system"}, component
    (scheduler,) = _pods(core, "scheduler")
    image = local_env.built_images().airflow_image
    assert scheduler.spec.containers[0].image == image, "the image built from docker/airflow/Dockerfile"
    config = core.read_namespaced_config_map("airflow-config", NAMESPACE).data["airflow.cfg"]
    assert "executor = KubernetesExecutor" in config
    # Airflow's tables are in the PostgreSQL this machine runs, not in a file of a pod.
    assert int(local_env.postgres().query("SELECT count(*) FROM alembic_version")) == 1


@dataclass(frozen=True)
class Night:
    """A run of the shipped DAG on the deployment: its Airflow run id and its run summary."""

    run_id: str
    state: str
    summary: dict[str, Any] | None


@pytest.fixture(scope="module")
def night(airflow_api: AirflowApi) -> Night:
    """reclaim-full-node (KAI's real suite) at 20 nodes, triggered through the REST API as make demo does."""
    wait_for_dag(airflow_api)
    run_id = trigger(airflow_api, {"node_count": 20, "scenarios": ["reclaim-full-node"]})
    state = follow(airflow_api, run_id)
    return Night(run_id=run_id, state=state, summary=run_summary(airflow_api, run_id))


@pytest.mark.timeout(1500)
def test_a_night_of_the_shipped_dag_runs_in_worker_pods_with_its_logs_in_s3(
    airflow_api: AirflowApi, core: client.CoreV1Api, night: Night
) -> None:
    instances = {ti["task_id"]: ti for ti in task_instances(airflow_api, night.run_id)}
    assert night.state == "success", {task: ti["state"] for task, ti in instances.items()}
    ran = [ti for ti in instances.values() if ti["state"] == "success"]
    # Each task ran in a worker pod of its own (the pod's name is the task's hostname).
    hostnames = [ti["hostname"] for ti in ran]
    assert len(set(hostnames)) == len(ran), hostnames
    (scheduler,) = _pods(core, "scheduler")
    assert scheduler.metadata.name not in hostnames
    assert night.summary is not None
    statuses = {entry["scenario"]: entry["status"] for entry in night.summary["scenarios"]}
    assert statuses.pop("reclaim-full-node") == "success"
    assert set(statuses.values()) == {"skipped"}, "the others are not selected"
    published = published_run(night.summary["run_id"])
    assert [e["status"] for e in published["entries"]] == ["success"], "one manifest entry"
    # Every task's log is in S3 once its pod is gone, and no log holds a presigned URL's signature.
    s3 = boto3.client("s3")  # endpoint and credentials from the AWS_* variables of the local environment
    logs = {}
    prefix = f"{TASK_LOGS_PREFIX}dag_id={DAG_ID}/run_id={night.run_id}/"
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=localenv_settings.DEFAULT_BUCKET, Prefix=prefix
    ):
        for item in page.get("Contents", []):
            body = s3.get_object(Bucket=localenv_settings.DEFAULT_BUCKET, Key=item["Key"])["Body"].read()
            logs[item["Key"]] = body.decode(errors="replace")
    logged_tasks = {key.split("task_id=")[1].split("/")[0] for key in logs}
    # Every task that had a worker pod, the unselected scenarios' too (they skip inside it).
    assert logged_tasks == {ti["task_id"] for ti in instances.values() if ti["hostname"]}
    assert {ti["task_id"] for ti in ran} <= logged_tasks
    assert not [key for key, text in logs.items() if "X-Amz-Signature" in text]
    assert "X-Amz-Signature" not in json.dumps(night.summary)


def test_the_deployed_api_server_serves_the_trend_view_with_its_chart_library(
    airflow_api: AirflowApi, night: Night
) -> None:
    """The image carries the view's assets (a checkout's `make view-assets` is not needed)."""
    assert night.summary is not None
    base = airflow_api.base_url
    page = f"{base}{VIEW_PREFIX}/runs"
    assert httpx.get(page, timeout=60).status_code == 401, "only who may read the DAG's runs"
    airflow_api.login()
    answer = httpx.get(page, headers={"Authorization": f"Bearer {airflow_api.token}"}, timeout=60)
    assert answer.status_code == 200, answer.text[:500]
    assert night.summary["run_id"] in answer.text
    assert "The chart library is not installed" not in answer.text
    library = httpx.get(f"{base}{VIEW_PREFIX}/static/vendor/echarts.min.js", timeout=60)
    assert library.status_code == 200
    assert len(library.content) > 500_000, "Apache ECharts' built file"


def test_the_pipeline_overhead_benchmark_reads_the_night(night: Night) -> None:
    """benchmarks/pipeline_overhead.py's smoke test, on the night above (--run-id: it starts none)."""
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "pipeline_overhead.py"), "--run-id", night.run_id],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for row in (
        "| reclaim-full-node (success): runner / task |",
        "| **overhead outside runner pods** |",
        "| worker pod from queued to running, ",
        "| Airflow's pods' memory, peak during the run | ",
    ):
        assert row in result.stdout, result.stdout
