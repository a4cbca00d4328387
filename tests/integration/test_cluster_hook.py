"""ClusterHook against the local API server: it watches rather than polls, and closes what it opens."""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

import psutil
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
    with ClusterHook(conn_id="kubernetes_default") as cluster:
        total, ready = cluster.wait_for_ready_nodes(
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
    with ClusterHook(conn_id="kubernetes_default") as cluster:
        cluster_setup.prepare_runner_access(cluster, include_dir=REPO / "include")
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
    with ClusterHook(conn_id="kubernetes_default") as earlier_task:
        assert earlier_task.names(api_version="stale.kai-scale.dev/v1", kind="Leftover") == []
    local_env.kubectl("delete", "crd", "leftovers.stale.kai-scale.dev", "--wait")

    with ClusterHook(conn_id="kubernetes_default") as later_task:
        assert later_task.names(api_version="stale.kai-scale.dev/v1", kind="Leftover") == []
        assert not later_task.crd_exists("leftovers.stale.kai-scale.dev")


def _connections_to(port: int) -> set[int]:
    """Local ports of the test process's established TCP connections to ``port``."""
    return {
        connection.laddr.port
        for connection in psutil.Process().net_connections(kind="tcp")
        if connection.raddr and connection.raddr.port == port and connection.status == psutil.CONN_ESTABLISHED
    }


def test_a_closed_hook_leaves_no_connection_to_the_api_server() -> None:
    """Each task closes its hook, whose client is in a reference cycle.

    Unclosed, its sockets stay open until the garbage collector runs, in whatever code runs then.
    Only the hook's own connections are compared: other clients of the process may come and go.
    """
    with ClusterHook(conn_id="kubernetes_default") as cluster:
        port = urlsplit(cluster.api_client.configuration.host).port
        assert port is not None
        before = _connections_to(port)
        cluster.node_count()
        cluster.names(api_version="v1", kind="Namespace")
        cluster.wait_for_ready_nodes(
            selector="kai-scale.dev/test=no-such-pool", resource="nvidia.com/gpu", count=1, timeout_seconds=2
        )
        opened = _connections_to(port) - before
        assert opened

    assert not opened & _connections_to(port)
