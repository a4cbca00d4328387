"""ClusterHook against the local API server: waiting for nodes watches rather than polls."""

from __future__ import annotations

import re

import pytest

from kai_scale.hooks.cluster import ClusterHook
from localenv.environment import LocalEnvironment

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
