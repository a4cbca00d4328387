"""Two nights in a row of the shipped DAG on a bare cluster, running two scenarios of KAI's real suite.

The environment is restarted first, so the cluster holds what a cluster admin installed (KAI, built
from source) and nothing of the pipeline's: the first night's setup installs KWOK, kwok-operator, the
fake GPU operator and the monitoring stack from their pinned sources (the local mirror), the second
finds them. Runs after every other test (the restarted cluster has a new CA).
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest

from kai_scale.metrics.profile import load_profile
from kai_scale.object_keys import scenario_outputs
from kai_scale.settings import DEFAULT_RUNNER_IMAGE
from kai_scale_model import labels
from localenv.environment import LocalEnvironment
from localenv.kai import RELEASE
from localenv.node import NODE_NAME
from tests.conftest import REPO
from tests.integration.airflow_env import published_run, read_json

pytestmark = pytest.mark.restarts_local_env

NODE_COUNT = 20
SCENARIOS = ("sanity-fill-cluster", "whole-gpu-pending-background")
NIGHT: dict[str, Any] = {"node_count": NODE_COUNT, "scenarios": list(SCENARIOS)}
ALL_SCENARIOS = {path.stem for path in (REPO / "include" / "scenarios").glob("*.yaml")}
# The entries KAI's suite writes for the scenarios' three specs (test/e2e/scale/kwok_test.go).
SUITE_TESTS = {
    "Fill Cluster with single GPU Jobs",
    "Fill Cluster with single GPU Jobs - scheduler is running while submitting jobs",
    "Fill Cluster with single GPU Jobs with 400 pending tasks in background",
}
# What the night's setup installs as infrastructure (and its teardown keeps).
INFRASTRUCTURE_RELEASES = {"fake-gpu-operator", "kube-prometheus-stack"}
INFRASTRUCTURE_DEPLOYMENTS = {"kwok-controller", "kwok-operator-kwok-operator"}
# A Go duration as KAI's suite writes it (time.Duration's String()), e.g. "1m2.5s" or "13.3s".
GO_DURATION = re.compile(r"^(\d+h)?(\d+m)?\d+(\.\d+)?(s|ms|µs|ns)$")


@pytest.mark.timeout(1500)
def test_two_nights_on_a_bare_cluster_both_run_the_suite_and_the_second_finds_the_firsts_setup(
    local_env: LocalEnvironment, airflow_on_local_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    local_env.down()
    local_env.up(node_count=0)
    local_env.install_kai()  # a no-op unless the environment runs without KAI (KAI_LOCALENV_KAI=0)
    assert _infrastructure(local_env) == {}, "a bare cluster: nothing of the pipeline's setup installed"
    kai_release = _releases(local_env)[RELEASE]
    monkeypatch.setenv("KAI_SCALE_RUNNER_IMAGE", DEFAULT_RUNNER_IMAGE)
    import kai_scale_nightly  # noqa: PLC0415 - imported after the fixtures point Airflow at the local environment

    first = _night(kai_scale_nightly.dag, local_env)
    installed = _infrastructure(local_env)
    assert set(installed) == {f"release/{name}" for name in INFRASTRUCTURE_RELEASES} | {
        f"deployment/{name}" for name in INFRASTRUCTURE_DEPLOYMENTS
    }
    second = _night(kai_scale_nightly.dag, local_env)
    assert _infrastructure(local_env) == installed, "the same objects at the same revisions: found, kept"
    assert _releases(local_env)[RELEASE] == kai_release, "KAI's release is the admin's: untouched"

    assert first != second
    published = published_run(second)
    assert [run["run_id"] for run in published["manifest_runs"]] == [first, second], "the history kept"


def _night(dag: Any, local_env: LocalEnvironment) -> str:
    """One night of the shipped DAG; its run id, after checking what it published and left behind."""
    dag_run = dag.test(run_conf=NIGHT)
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert dag_run.state == "success", states
    for scenario in SCENARIOS:
        assert states[f"run_{scenario.replace('-', '_')}"] == "success"
    assert states["tear_down_environment"] == "success"
    summary = dag_run.get_task_instance("publish_results").xcom_pull(
        task_ids="publish_results", key="run_summary"
    )
    run_id = str(summary["run_id"])
    published = published_run(run_id)

    metadata = published["results"]["metadata"]
    assert metadata["kai_commit_hash"] == local_env.built_images().kai_commit, "the suite of KAI's build"
    pushed = local_env.registry().digest(f"{DEFAULT_RUNNER_IMAGE}:main")
    assert metadata["runner_image_ids"] == dict.fromkeys(SCENARIOS, f"{DEFAULT_RUNNER_IMAGE}@{pushed}"), (
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
    assert skipped == ALL_SCENARIOS - set(SCENARIOS), "the scenarios not selected, by name"
    tests = [test for test in results["tests"] if test["status"] != "skipped"]
    assert {test["test_name"] for test in tests} == SUITE_TESTS, "the suite's own entries"
    for test in tests:
        assert test["status"] == "success", test
        details = test["details"]
        assert (details["nodes"], details["jobs"]) == (NODE_COUNT, NODE_COUNT * 8), test
        assert GO_DURATION.match(details["time"]), f"the suite's own duration string: {test}"
    published_tests = {test["test_name"]: test for test in tests}
    for written in _suite_results_as_written(summary):
        published_test = published_tests[written["test_name"]]
        assert {key: published_test.get(key) for key in written} == written, "as KAI's suite wrote it"
    its = [
        spec["State"]
        for suite in published["report"]
        for spec in suite["SpecReports"] or []
        if spec["LeafNodeType"] == "It"
    ]
    assert its.count("passed") == len(SUITE_TESTS), "Ginkgo's own report: one passed spec per entry"
    assert set(its) == {"passed", "skipped"}, "the focus skipped the other specs"

    profile = load_profile(REPO / "include" / "metrics" / "default.yaml")
    kai_metrics = [query.name for query in profile.queries if "kai_" in query.query]
    assert kai_metrics, "the metrics profile queries KAI's own metrics"
    for scenario in SCENARIOS:
        metrics = published["metrics"]["scenarios"][scenario]
        assert metrics["status"] == "collected", scenario
        series = {name: metrics["metrics"][name]["series"] for name in kai_metrics}
        scraped = json.dumps(series)[:1000]
        assert all(series.values()), f"the real Prometheus scraped KAI in {scenario}: {scraped}"

    (entry,) = published["entries"]
    assert (entry["status"], entry["node_count"]) == ("success", NODE_COUNT)
    _check_only_the_infrastructure_is_left(local_env, run_id)
    return run_id


def _check_only_the_infrastructure_is_left(local_env: LocalEnvironment, run_id: str) -> None:
    """The night's teardown removed what it added: its pool and nodes, its pods, the suite's namespaces."""
    pool = local_env.kubectl("get", "nodepools", "--output=name")
    assert pool.strip() == "", "the pool the night created is deleted"
    nodes = local_env.kubectl("get", "nodes", "--output=name").split()
    assert nodes == [f"node/{NODE_NAME}"], "no KWOK node left"
    pods = local_env.kubectl(
        "get",
        "pods",
        "--all-namespaces",
        f"--selector={labels.RUN_ID}={labels.label_value(run_id)}",
        "--output=name",
    )
    assert pods.strip() == "", "no pod of the run"
    suites = local_env.kubectl("get", "namespaces", "--selector=app=engine-e2e", "--output=name")
    assert suites.strip() == "", "no namespace of KAI's suite"


def _releases(local_env: LocalEnvironment) -> dict[str, str]:
    """Every helm release of the cluster, by name: its revision."""
    listed = subprocess.run(
        [
            str(local_env.config.helm_dir / "helm"),
            "list",
            "--all-namespaces",
            "--output=json",
            f"--kubeconfig={local_env.config.kubeconfig}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return {release["name"]: str(release["revision"]) for release in json.loads(listed.stdout)}


def _suite_results_as_written(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries of each scenario's ``kwok_scale_test.json``, as the runner uploaded the suite's file."""
    written: list[dict[str, Any]] = []
    for entry in summary["scenarios"]:
        if entry["scenario"] in SCENARIOS:
            key = scenario_outputs(
                run_id=summary["run_id"], scenario=entry["scenario"], try_number=entry["try_number"]
            ).suite_results
            written += read_json(key)["tests"]
    assert {test["test_name"] for test in written} == SUITE_TESTS, written
    return written


def _infrastructure(local_env: LocalEnvironment) -> dict[str, str]:
    """The pipeline's infrastructure: helm releases by revision, labelled Deployments by uid."""
    found = {
        f"release/{name}": revision
        for name, revision in _releases(local_env).items()
        if name in INFRASTRUCTURE_RELEASES
    }
    deployments = local_env.kubectl(
        "get",
        "deployments",
        "--all-namespaces",
        f"--selector={labels.ROLE}={labels.INFRASTRUCTURE}",
        "--output=jsonpath={range .items[*]}{.metadata.name}={.metadata.uid}{'\\n'}{end}",
    )
    for line in deployments.split():
        name, _, uid = line.partition("=")
        found[f"deployment/{name}"] = uid
    return found
