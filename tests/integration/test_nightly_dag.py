"""The nightly DAG run with dag.test() on the local environment.

setup -> scenarios -> metrics -> publishing -> teardown, with the local Prometheus and S3 endpoint.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from pathlib import Path
from typing import Any

import boto3
import pytest
from kubernetes import client

from kai_scale.cluster.teardown import teardown
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.hooks.cluster_errors import ApiError
from kai_scale.object_keys import run_summary_key
from kai_scale.settings import DEFAULT_RUNNER_IMAGE
from localenv import settings as localenv_settings
from localenv.environment import LocalEnvironment
from tests.integration.airflow_env import (
    include_dir_with,
    nightly_dag,
    published_run,
    workload_scenario,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("airflow_on_local_env")


def _s3() -> Any:
    return boto3.client("s3")  # endpoint and credentials from the AWS_* variables of the local environment


def _summary(dag_run: Any) -> dict[str, Any]:
    ti = dag_run.get_task_instance("publish_results")
    run_id = ti.xcom_pull(task_ids="publish_results", key="run_summary")["run_id"]
    body = _s3().get_object(Bucket=localenv_settings.DEFAULT_BUCKET, Key=run_summary_key(run_id))["Body"]
    return dict(json.loads(body.read()))


def _states(dag_run: Any) -> dict[str, str | None]:
    return {ti.task_id: ti.state for ti in dag_run.get_task_instances()}


def _node_pool_size(local_env: LocalEnvironment) -> int | None:
    """managed-nodepool's size; None when there is none (a fresh cluster, or after a night's teardown)."""
    if not local_env.kubectl("get", "crd", "nodepools.kwok.sigs.run-ai.com", "--ignore-not-found").strip():
        return None  # kwok-operator not installed yet
    size = local_env.kubectl(
        "get", "nodepool", "managed-nodepool", "--ignore-not-found", "-o", "jsonpath={.spec.nodeCount}"
    )
    return int(size) if size.strip() else None


@pytest.mark.timeout(900)  # a night at 100 nodes, and KAI uninstalled and installed again
@pytest.mark.usefixtures("prometheus", "without_kai")
def test_the_shipped_dag_on_a_cluster_without_kai(
    local_env: LocalEnvironment, core: client.CoreV1Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DAG file as shipped, node_count 100 (Prometheus already has rates: the window is short).

    The runner pods run the shipped runner image (not the tests' one with the stand-in suite). KAI is
    uninstalled for this test, so the KAI suite's scenarios end as not run with that reason: their tasks
    fail, the run is incomplete (published, then publish_results fails) and the DAG run fails. The GPU
    workload runs for real against kube-scheduler, and teardown runs.
    """
    monkeypatch.setenv("KAI_SCALE_RUNNER_IMAGE", DEFAULT_RUNNER_IMAGE)
    import kai_scale_nightly  # noqa: PLC0415 - imported after the fixtures point Airflow at the local environment

    size_before = _node_pool_size(local_env)
    dag_run = kai_scale_nightly.dag.test(run_conf={"node_count": 100})
    states = _states(dag_run)
    assert dag_run.state == "failed", states
    summary = _summary(dag_run)
    by_name = {entry["scenario"]: entry for entry in summary["scenarios"]}
    workload = by_name.pop("gpu-pod-throughput")
    assert workload["status"] == "success"
    (measurement,) = workload["outcome"]["tests"]
    assert measurement["test_name"] == "GPU pod scheduling throughput"
    assert measurement["details"]["pods"] == measurement["details"]["scheduled pods"] == 400
    assert measurement["details"]["throughput average (pods/s)"] > 0
    off_by_default = by_name.pop("reclaim-full-node")
    assert (off_by_default["status"], states["run_reclaim_full_node"]) == ("skipped", "skipped")
    for name, entry in by_name.items():
        assert (entry["status"], entry["reason"], entry["failure_kind"]) == (
            "not_run",
            "KAI not installed: CRD queues.scheduling.run.ai not found",
            None,
        ), name
        assert states[f"run_{name.replace('-', '_')}"] == "failed", name
    assert states["run_gpu_pod_throughput"] == "success"
    assert (states["collect_metrics"], states["publish_results"]) == ("success", "failed")
    assert (states["tear_down_environment"], states["check_teardown"]) == ("success", "success")
    assert (summary["status"], summary["failure_kind"], summary["failed_scenarios"]) == (
        "incomplete",
        None,
        [],
    )
    assert sorted(summary["not_run_scenarios"]) == sorted(by_name)
    assert summary["node_count"] == 100
    published = _checkpublished_run(summary["run_id"], not_run=sorted(by_name))
    # The digest the node pulled is the one the local registry serves: the image built from the Dockerfile.
    pushed = local_env.registry().digest(f"{DEFAULT_RUNNER_IMAGE}:main")
    image_ids = published["results"]["metadata"]["runner_image_ids"]
    assert set(image_ids.values()) == {f"{DEFAULT_RUNNER_IMAGE}@{pushed}"}
    # Teardown put the cluster back: the NodePool's size, no pods of the run.
    assert _node_pool_size(local_env) == size_before
    leftovers = core.list_pod_for_all_namespaces(
        label_selector=f"kai-scale.dev/run-id={summary['run_id']}"
    ).items
    assert leftovers == []


def _checkpublished_run(run_id: str, *, not_run: list[str]) -> dict[str, Any]:
    published = published_run(run_id)
    metadata = published["results"]["metadata"]
    assert metadata["kwok_node_count"] == 100
    assert metadata["cluster_node_count"] >= 100
    assert metadata["kai_scheduler_ref"]
    assert metadata["timestamp"].endswith("Z")
    # The local deployment's tuning profile (include/manifests/kai-tuning/local.yaml).
    assert metadata["service_resources"]["scheduler"]["requests"] == {"cpu": "250m", "memory": "1Gi"}
    assert metadata["kubernetes_version"] == "v1.34.4", "read from the cluster, not assumed"
    assert metadata["runner_image"] == f"{DEFAULT_RUNNER_IMAGE}:main"
    assert set(metadata["runner_image_ids"]) == {"gpu-pod-throughput", *not_run}
    results = published["results"]["results"]
    assert (results["status"], results["failure_kind"]) == ("incomplete", None)
    tests = {test["test_name"]: test for test in results["tests"]}
    assert tests.pop("GPU pod scheduling throughput")["status"] == "success"
    assert tests.pop("reclaim-full-node")["status"] == "skipped", "off by default: not selected"
    assert sorted(tests) == not_run, "a scenario that did not run still appears, by name"
    for test in tests.values():
        assert test["status"] == "not_run"
        assert test["details"]["message"] == "KAI not installed: CRD queues.scheduling.run.ai not found"
    assert published["report"] == [], "no suite ran, so the merged report is empty"
    metrics = published["metrics"]["scenarios"]
    assert set(metrics) == {"gpu-pod-throughput", *not_run}
    workload = metrics["gpu-pod-throughput"]
    assert workload["status"] == "collected"
    assert workload["window"]["source"] == "runner"
    assert workload["metrics"]["apiserver_request_rate"]["series"], "the API server is scraped locally"
    (entry,) = published["entries"]
    assert entry["path"] == published["results_key"]
    assert (entry["status"], entry["verdict"], entry["node_count"]) == ("incomplete", "incomplete", 100)
    assert (entry["failure_kind"], entry["failed_scenarios"]) == (None, [])
    assert sorted(entry["not_run_scenarios"]) == not_run
    return published


def test_runner_image_that_cannot_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAI_SCALE_RUNNER_IMAGE", "example.invalid/not-a-runner")
    include = include_dir_with(tmp_path, {"small-workload": workload_scenario()})
    dag_run = nightly_dag(include).test(run_conf={"node_count": 10})
    states = _states(dag_run)
    assert states["run_small_workload"] == "failed"
    assert states["tear_down_environment"] == "success"
    summary = _summary(dag_run)
    (entry,) = summary["scenarios"]
    assert (entry["status"], entry["failure_kind"]) == ("failure", "infrastructure")
    assert "produced no outcome" in entry["reason"]
    assert (summary["status"], summary["failure_kind"]) == ("failure", "infrastructure")


def test_a_missing_bucket_is_named_by_the_tasks_that_need_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The runner's upload, collect_metrics and publish_results each name the bucket; teardown runs."""
    monkeypatch.setenv("KAI_SCALE_RESULTS_BUCKET", "no-such-bucket")
    include = include_dir_with(tmp_path, {"small-workload": workload_scenario()})
    dag_run = nightly_dag(include).test(run_conf={"node_count": 10})
    states = _states(dag_run)
    assert states["run_small_workload"] == "failed", "its outputs could not be uploaded"
    assert states["collect_metrics"] == "failed"
    assert states["publish_results"] == "failed"
    assert states["tear_down_environment"] == "success"
    captured = capfd.readouterr()
    output = captured.out + captured.err
    # A workload writes no Ginkgo report, so its outcome.json is the only output.
    assert "outputs not uploaded: uploading outcome.json failed: HTTP 404" in output
    assert "BucketError: could not read the scenarios' outcomes and clear runs/" in output
    assert "BucketError: could not read the outputs of run " in output
    assert "in s3://no-such-bucket: An error occurred (NoSuchBucket)" in output


# A cluster policy that forbids deleting NodePools: the teardown of a run that created the pool fails.
NO_NODEPOOL_DELETION = "kai-scale-test-no-nodepool-deletion"
NODEPOOL_DELETION_POLICY: list[dict[str, Any]] = [
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": NO_NODEPOOL_DELETION},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["kwok.sigs.run-ai.com"],
                        "apiVersions": ["*"],
                        "operations": ["DELETE"],
                        "resources": ["nodepools"],
                    }
                ]
            },
            "validations": [
                {"expression": "false", "message": "NodePools are not deleted here (test policy)"}
            ],
        },
    },
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": NO_NODEPOOL_DELETION},
        "spec": {"policyName": NO_NODEPOOL_DELETION, "validationActions": ["Deny"]},
    },
]


@pytest.mark.usefixtures("prepared_cluster")
def test_a_teardown_that_fails_fails_the_run(
    tmp_path: Path, local_env: LocalEnvironment, capfd: pytest.CaptureFixture[str]
) -> None:
    """Everything else succeeds; the teardown cannot delete the pool the run created, and the run fails."""
    assert _node_pool_size(local_env) is None, "the run creates the pool, so its teardown deletes it"
    policy = json.dumps({"kind": "List", "apiVersion": "v1", "items": NODEPOOL_DELETION_POLICY})
    local_env.kubectl("apply", "-f", "-", input_text=policy)
    try:
        include = include_dir_with(tmp_path, {"small-workload": workload_scenario()})
        dag_run = nightly_dag(include).test(run_conf={"node_count": 10})
    finally:
        local_env.kubectl(
            "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", NO_NODEPOOL_DELETION
        )
        _tear_down_what_the_run_left()
    states = _states(dag_run)
    assert (states.pop("tear_down_environment"), states.pop("check_teardown")) == ("failed", "failed")
    assert set(states.values()) == {"success"}, f"every other task succeeded: {states}"
    assert dag_run.state == "failed", "the teardown's failure is the run's"
    output = capfd.readouterr()
    assert "NodePools are not deleted here (test policy)" in output.out + output.err
    assert _node_pool_size(local_env) is None


def _tear_down_what_the_run_left() -> None:
    """A teardown as a retried one, once the policy is gone (the API server drops it a moment later)."""
    with ClusterHook(conn_id="kubernetes_default") as cluster:

        def torn_down() -> bool:
            try:
                teardown(cluster, run_id="after-the-test", existing=None)
            except ApiError as error:
                if error.status != HTTPStatus.UNPROCESSABLE_ENTITY:  # 422: the policy, not yet dropped
                    raise
                return False
            return True

        wait_for(torn_down, timeout=60, what="a teardown once the policy is deleted")
