"""ClusterHook against the local API server: waiting for nodes watches rather than polls."""

from __future__ import annotations

import json
import re

import pytest

from kai_scale.cluster import setup as cluster_setup
from kai_scale.hooks.cluster import ClusterHook
from localenv.environment import LocalEnvironment
from tests.conftest import REPO

pytestmark = pytest.mark.usefixtures("airflow_on_local_env")

NODE_LISTS = re.compile(
    r'^apiserver_request_total\{(?=[^}]*resource="nodes")(?=[^}]*verb="LIST")[^}]*\} (\d+)', re.M
)


def _node_lists(local_env: LocalEnvironment) -> int:
    """LIST requests of nodes the API server has answered, from its own metrics."""
    return sum(int(count) for count in NODE_LISTS.findall(local_env.kubectl("get", "--raw", "/metrics")))


def test_waiting_for_nodes_lists_once_then_watches(local_env: LocalEnvironment) -> None:
    before = _node_lists(local_env)
    total, ready = ClusterHook(conn_id="kubernetes_default").wait_for_ready_nodes(
        selector="kai-scale.dev/test=no-such-pool", resource="nvidia.com/gpu", count=1, timeout_seconds=12
    )
    lists = _node_lists(local_env) - before
    assert (total, ready) == (0, 0)
    # A poll every 2 s would have listed about six times; other clients may add one.
    assert lists <= 2, f"{lists} node LISTs while waiting 12 s"


RUNNER = "system:serviceaccount:kai-scale:kai-scale-runner"


@pytest.mark.parametrize(
    ("verb", "resource", "namespace", "allowed"),
    [
        ("create", "pods", "kai-scale", True),  # the workload
        ("deletecollection", "pods", "kai-scale", True),
        ("create", "pods", "default", False),  # nothing outside its own namespace
        ("create", "deployments", "kai-scale", False),  # nor kinds nobody uses
        ("create", "daemonsets", "kube-system", False),
        ("get", "secrets", "kai-scale", False),  # not even its own upload URLs' Secrets
        ("update", "configmaps/topology", "gpu-operator", True),  # the suite sets the GPU count
        ("update", "configmaps/other", "gpu-operator", False),
        ("create", "jobs.batch", "kai-queue-x", True),
    ],
)
def test_the_runner_may_do_what_the_workload_and_the_suite_do_and_no_more(
    local_env: LocalEnvironment, verb: str, resource: str, namespace: str | None, allowed: bool
) -> None:
    cluster_setup.prepare_runner_access(
        ClusterHook(conn_id="kubernetes_default"), include_dir=REPO / "include"
    )
    scope = ["-n", namespace] if namespace else []
    answer = local_env.kubectl("auth", "can-i", verb, resource, *scope, f"--as={RUNNER}", check=False)
    assert answer.strip() == ("yes" if allowed else "no")


STALE_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "leftovers.stale.kai-scale.dev"},
    "spec": {
        "group": "stale.kai-scale.dev",
        "scope": "Cluster",
        "names": {"plural": "leftovers", "singular": "leftover", "kind": "Leftover"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object"}},
            }
        ],
    },
}


def test_a_kind_gone_since_an_earlier_task_discovered_it_is_not_served(local_env: LocalEnvironment) -> None:
    """Discovery is cached on the worker's disk per API server: a later task must not trust it.

    As on a cluster rebuilt at the same address, or whose CRD was removed between two nights.
    """
    local_env.kubectl("apply", "-f", "-", input_text=json.dumps(STALE_CRD))
    local_env.kubectl("wait", "--for=condition=Established", "crd/leftovers.stale.kai-scale.dev")
    assert (
        ClusterHook(conn_id="kubernetes_default").names(api_version="stale.kai-scale.dev/v1", kind="Leftover")
        == []
    )
    local_env.kubectl("delete", "crd", "leftovers.stale.kai-scale.dev", "--wait")

    later_task = ClusterHook(conn_id="kubernetes_default")

    assert later_task.names(api_version="stale.kai-scale.dev/v1", kind="Leftover") == []
    assert not later_task.crd_exists("leftovers.stale.kai-scale.dev")
