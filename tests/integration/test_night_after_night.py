"""Two nights in a row of the shipped DAG on a bare cluster, running KAI's real scale suite.

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
from kai_scale.settings import DEFAULT_RUNNER_IMAGE
from localenv.environment import LocalEnvironment
from tests.conftest import REPO
from tests.integration.airflow_env import published_run

pytestmark = pytest.mark.restarts_local_env

NODE_COUNT = 20
NIGHT: dict[str, Any] = {"node_count": NODE_COUNT, "scenarios": ["sanity-fill-cluster"]}
# What the night's setup installs as infrastructure (and its teardown keeps).
ALL_SCENARIOS = {path.stem for path in (REPO / "include" / "scenarios").glob("*.yaml")}
INFRASTRUCTURE_RELEASES = {"fake-gpu-operator", "kube-prometheus-stack"}
INFRASTRUCTURE_LABEL = "kai-scale.dev/role=infrastructure"
# A Go duration as KAI's suite writes it (time.Duration's String()), e.g. "1m2.5s" or "13.3s".
GO_DURATION = re.compile(r"^(\d+h)?(\d+m)?\d+(\.\d+)?(s|ms|µs|ns)$")


def test_two_nights_on_a_bare_cluster_both_run_the_suite_and_the_second_finds_the_firsts_setup(
    local_env: LocalEnvironment, airflow_on_local_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    local_env.down()
    local_env.up(node_count=0)
    local_env.install_kai()  # a no-op unless the environment runs without KAI (KAI_LOCALENV_KAI=0)
    assert _infrastructure(local_env) == {}, "a bare cluster: nothing of the pipeline's setup installed"
    monkeypatch.setenv("KAI_SCALE_RUNNER_IMAGE", DEFAULT_RUNNER_IMAGE)
    import kai_scale_nightly  # noqa: PLC0415 - imported after the fixtures point Airflow at the local environment

    first = _night(kai_scale_nightly.dag)
    installed = _infrastructure(local_env)
    assert set(installed) >= {f"release/{name}" for name in INFRASTRUCTURE_RELEASES}
    assert any(key.startswith("deployment/") for key in installed), "KWOK's and kwok-operator's controllers"
    second = _night(kai_scale_nightly.dag)
    assert _infrastructure(local_env) == installed, "the same objects at the same revisions: found, kept"

    assert first != second
    published = published_run(second)
    assert [run["run_id"] for run in published["manifest_runs"]] == [first, second], "the history kept"


def _night(dag: Any) -> str:
    """One night of the shipped DAG; its run id, after checking what it published and left behind."""
    dag_run = dag.test(run_conf=NIGHT)
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert dag_run.state == "success", states
    assert states["run_sanity_fill_cluster"] == "success"
    assert states["tear_down_environment"] == "success"
    run_id = dag_run.get_task_instance("publish_results").xcom_pull(
        task_ids="publish_results", key="run_summary"
    )["run_id"]
    published = published_run(run_id)

    results = published["results"]
    assert results["metadata"]["kai_commit_hash"], "the KAI the runner image's suite was built from"
    assert (results["results"]["status"], results["metadata"]["kwok_node_count"]) == ("success", NODE_COUNT)
    entries = results["results"]["tests"]
    skipped = {test["test_name"] for test in entries if test["status"] == "skipped"}
    assert skipped == ALL_SCENARIOS - set(NIGHT["scenarios"]), "the scenarios not selected, by name"
    tests = [test for test in entries if test["status"] != "skipped"]
    assert tests, "the suite's own entries"
    for test in tests:
        assert test["status"] == "success", test
        details = test["details"]
        assert details["nodes"] == NODE_COUNT, test
        assert GO_DURATION.match(details["time"]), f"the suite's own duration string: {test}"
    spec_states = [spec["State"] for suite in published["report"] for spec in suite["SpecReports"] or []]
    assert set(spec_states) <= {"passed", "skipped"}, "Ginkgo's own report: the focus skipped the other specs"
    assert spec_states.count("passed") >= len(tests), "a passed spec for each entry the suite wrote"

    metrics = published["metrics"]["scenarios"]["sanity-fill-cluster"]
    assert metrics["status"] == "collected"
    profile = load_profile(REPO / "include" / "metrics" / "default.yaml")
    kai_metrics = [query.name for query in profile.queries if "kai_" in query.query]
    assert kai_metrics, "the metrics profile queries KAI's own metrics"
    series = {name: metrics["metrics"][name]["series"] for name in kai_metrics}
    assert all(series.values()), f"the real Prometheus scraped KAI: {json.dumps(series)[:1000]}"

    (entry,) = published["entries"]
    assert (entry["status"], entry["node_count"]) == ("success", NODE_COUNT)
    return str(run_id)


def _infrastructure(local_env: LocalEnvironment) -> dict[str, str]:
    """The pipeline's infrastructure: helm releases by revision, labelled Deployments by uid."""
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
    found = {
        f"release/{release['name']}": str(release["revision"])
        for release in json.loads(listed.stdout)
        if release["name"] in INFRASTRUCTURE_RELEASES
    }
    deployments = local_env.kubectl(
        "get",
        "deployments",
        "--all-namespaces",
        f"--selector={INFRASTRUCTURE_LABEL}",
        "--output=jsonpath={range .items[*]}{.metadata.name}={.metadata.uid}{'\\n'}{end}",
    )
    for line in deployments.split():
        name, _, uid = line.partition("=")
        found[f"deployment/{name}"] = uid
    return found
