"""Setup steps against the local cluster, as a nightly run meets them night after night."""

from __future__ import annotations

import json

import pytest
import yaml
from kubernetes import client

from kai_scale.cluster.gpus import free_gpus
from kai_scale.cluster.installs import read_installs
from kai_scale.cluster.inventory import preflight
from kai_scale.cluster.manifests import SetupError
from kai_scale.cluster.node_pool import wait_for_nodes
from kai_scale.cluster.tasks import setup_step
from kai_scale.cluster.teardown import teardown
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.settings import PipelineSettings
from localenv.environment import LocalEnvironment
from localenv.node_config import NODE_NAME
from tests.conftest import REPO

pytestmark = pytest.mark.usefixtures("airflow_on_local_env")

# What the setup installs, as include/manifests/installs.yaml pins it.
KWOK = read_installs(REPO / "include").kwok
FAST_STAGES = {"node-initialize", "node-heartbeat-with-lease", "pod-ready", "pod-delete"}
SUITE_STAGE = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1",
    "kind": "Stage",
    "metadata": {"name": "left-by-the-suite"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchLabels": {"kai-scale.dev/test": "no-such-pod"}},
        "next": {"delete": True},
    },
}


def _stages(local_env: LocalEnvironment) -> set[str]:
    return set(
        local_env.kubectl("get", "stages", "--output=name").replace("stage.kwok.x-k8s.io/", "").split()
    )


def test_a_cluster_without_kwok_gets_its_release_with_the_controller_on_the_system_node(
    local_env: LocalEnvironment,
) -> None:
    """The first night: kwok's release, from its mirror, and its controller a pod on the system node."""
    settings = PipelineSettings.from_environment(default_include_dir=REPO / "include")
    release = local_env.config.mirror_dir / KWOK.manifests[0].removeprefix("https://")
    local_env.kubectl("delete", "--ignore-not-found", "--wait", "-f", str(release))

    lines = setup_step("install_kwok").run(settings=settings).lines

    assert lines[0].startswith(f"installed KWOK {KWOK.version}: ")
    local_env.kubectl(
        "-n", "kube-system", "rollout", "status", "deployment/kwok-controller", "--timeout=120s"
    )
    pods = json.loads(
        local_env.kubectl("-n", "kube-system", "get", "pods", "-l", "app=kwok-controller", "-o", "json")
    )
    # Not the old controller's pod, which may still be terminating.
    [pod] = [pod for pod in pods["items"] if "deletionTimestamp" not in pod["metadata"]]
    assert pod["spec"]["nodeName"] == NODE_NAME
    assert pod["spec"]["containers"][0]["image"] == f"registry.k8s.io/kwok/kwok:{KWOK.version}"
    assert setup_step("install_kwok").run(settings=settings).lines[0] == "KWOK already installed", (
        "the next night"
    )


@pytest.mark.usefixtures("prepared_cluster")
def test_teardown_keeps_the_stages_the_setup_installed_and_removes_the_runs(
    local_env: LocalEnvironment,
    cluster: ClusterHook,
) -> None:
    """The second night's nodes need the first night's stages: teardown removes only what the run made."""
    settings = PipelineSettings.from_environment(default_include_dir=REPO / "include")
    # What an older teardown left behind: no stages at all.
    local_env.kubectl("delete", "stages", "--all")
    inventory = preflight(cluster)

    lines = setup_step("install_kwok").run(settings=settings).lines

    assert lines[0] == "KWOK already installed"
    assert lines[1].startswith(f"applied KWOK {KWOK.version}'s stages: ")
    assert lines[2] == "stage pod-complete: absent", "never applied"
    assert _stages(local_env) == FAST_STAGES
    local_env.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(SUITE_STAGE))

    teardown(cluster, run_id="night-1", existing=inventory.existing)

    assert _stages(local_env) == FAST_STAGES, "the setup's stages stay, the run's own is gone"
    again = setup_step("install_kwok").run(settings=settings).lines
    assert again[1:] == lines[1:], "the next night applies the same stages and finds nothing else to do"


@pytest.mark.usefixtures("prepared_cluster")
@pytest.mark.parametrize("node_count", [0, 2])
def test_teardown_deletes_the_pool_its_run_created_with_its_nodes(
    local_env: LocalEnvironment, node_count: int, cluster: ClusterHook
) -> None:
    """The real kwok-operator lets the pool go, also the empty one its 1.0.1 never deletes by itself.

    The next night's setup then creates the pool afresh and meets no node of the old one.
    """
    settings = PipelineSettings.from_environment(default_include_dir=REPO / "include")
    pool_nodes = ("get", "nodes", "-l", "kwok.x-k8s.io/controller=managed-nodepool", "--output=name")
    setup_step("size_node_pool").run(settings=settings, params={"node_count": node_count})
    wait_for_nodes(cluster, node_count=node_count)
    assert len(local_env.kubectl(*pool_nodes).split()) == node_count

    lines = teardown(cluster, run_id="night-1", existing=None)

    assert lines[-1] == "NodePool managed-nodepool deleted (the run created it)"
    assert local_env.kubectl("get", "nodepools", "--output=name") == ""
    assert local_env.kubectl(*pool_nodes) == ""


def test_gpus_held_by_someone_else_stop_the_scenario_naming_them(
    core: client.CoreV1Api, namespace: str
) -> None:
    """A pod this pipeline did not make holds a GPU: the scenario does not start, and the pod stays.

    What the scenario task does before its runner (its GPUs freed of what earlier scenarios left, on
    the deployment: airflow_deployment/test_standin_night.py).
    """
    # Bound at creation to a node no kubelet serves: it holds its GPU until deleted, as a stuck job does.
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "someone-elses", "labels": {"app": "not-ours"}},
            "spec": {
                "nodeName": "held-gpus",
                "containers": [
                    {"name": "main", "image": "pause", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                ],
            },
        },
    )
    try:
        with ClusterHook(conn_id="kubernetes_default") as cluster, pytest.raises(SetupError) as stopped:
            free_gpus(cluster, scenario="small-workload")
        assert core.read_namespaced_pod("someone-elses", namespace), "not ours to remove"
    finally:  # at once: no kubelet confirms it stopped
        core.delete_namespaced_pod("someone-elses", namespace, grace_period_seconds=0)
    said = str(stopped.value)
    held = f"({namespace}/someone-elses (1))"
    assert said.startswith(f"1 nvidia.com/gpu are held by pods this pipeline did not make {held}"), said
    assert "small-workload would not measure a free cluster" in said
