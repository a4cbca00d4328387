"""The pipeline on Airflow as its users run it: the official chart in the local cluster.

The chart 1.21.0 as its maintainers ship it, with deploy/airflow/values.yaml and the local overlay:
api-server, scheduler, dag-processor, triggerer and statsd on the system node, the metadata database
in the local PostgreSQL outside the cluster, KubernetesExecutor worker pods, task logs in S3. The
nightly DAG is the one the image carries, triggered through the deployed api-server's REST API
(test_retry_via_rest_api.py has the trigger guard, retries and lost pieces of Airflow).
"""

from __future__ import annotations

import json
import subprocess

import boto3
import pytest
from kubernetes import client

from localenv import postgres
from localenv import settings as localenv_settings
from localenv.airflow import NAMESPACE, TASK_LOGS_PREFIX, AirflowApi, AirflowDeployment
from localenv.demo import DAG_ID, follow, run_summary, task_instances, trigger, wait_for_dag
from localenv.environment import LocalEnvironment
from localenv.node import SYSTEM_NODE_LABEL
from tests.integration.airflow_env import published_run

pytestmark = pytest.mark.usefixtures("kai", "as_shipped")


@pytest.fixture(scope="module")
def as_shipped(airflow_deployment: AirflowDeployment) -> None:
    """The release with the repository's values and nothing else (another module may have overridden)."""
    airflow_deployment.deploy()


def _pods(core: client.CoreV1Api, component: str) -> list[client.V1Pod]:
    return list(core.list_namespaced_pod(NAMESPACE, label_selector=f"component={component}").items)


def _postgres_query(local_env: LocalEnvironment, query: str) -> str:
    server = local_env.postgres()
    result = subprocess.run(
        [
            str(postgres.POSTGRES_BIN / "psql"),
            "-h",
            "127.0.0.1",
            "-p",
            str(server.port),
            f"--username={postgres.USER}",
            f"--dbname={postgres.DATABASE}",
            "--tuples-only",
            "--no-align",
            "-c",
            query,
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"PGPASSWORD": postgres.PASSWORD, "PATH": "/usr/bin:/bin"},
    )
    return result.stdout.strip()


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
    assert int(_postgres_query(local_env, "SELECT count(*) FROM alembic_version")) == 1


@pytest.mark.timeout(1200)
def test_a_night_of_the_shipped_dag_runs_in_worker_pods_with_its_logs_in_s3(
    airflow_api: AirflowApi, core: client.CoreV1Api
) -> None:
    """reclaim-full-node (KAI's real suite) at 20 nodes, as make demo runs it."""
    wait_for_dag(airflow_api)
    run_id = trigger(airflow_api, {"node_count": 20, "scenarios": ["reclaim-full-node"]})
    state = follow(airflow_api, run_id)
    instances = {ti["task_id"]: ti for ti in task_instances(airflow_api, run_id)}
    assert state == "success", {task: ti["state"] for task, ti in instances.items()}
    ran = [ti for ti in instances.values() if ti["state"] == "success"]
    # Each task ran in a worker pod of its own (the pod's name is the task's hostname).
    hostnames = [ti["hostname"] for ti in ran]
    assert len(set(hostnames)) == len(ran), hostnames
    (scheduler,) = _pods(core, "scheduler")
    assert scheduler.metadata.name not in hostnames
    summary = run_summary(airflow_api, run_id)
    assert summary is not None
    (entry,) = summary["scenarios"]
    assert (entry["scenario"], entry["status"]) == ("reclaim-full-node", "success")
    published = published_run(summary["run_id"])
    assert [e["status"] for e in published["entries"]] == ["success"], "one manifest entry"
    # Every task's log is in S3 once its pod is gone, and no log holds a presigned URL's signature.
    s3 = boto3.client("s3")  # endpoint and credentials from the AWS_* variables of the local environment
    logs = {}
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=localenv_settings.DEFAULT_BUCKET, Prefix=f"{TASK_LOGS_PREFIX}dag_id={DAG_ID}/run_id={run_id}/"
    ):
        for item in page.get("Contents", []):
            body = s3.get_object(Bucket=localenv_settings.DEFAULT_BUCKET, Key=item["Key"])["Body"].read()
            logs[item["Key"]] = body.decode(errors="replace")
    logged_tasks = {key.split("task_id=")[1].split("/")[0] for key in logs}
    assert logged_tasks == {ti["task_id"] for ti in ran}
    assert not [key for key, text in logs.items() if "X-Amz-Signature" in text]
    assert "X-Amz-Signature" not in json.dumps(summary)
