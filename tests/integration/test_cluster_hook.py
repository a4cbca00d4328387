"""ClusterHook against the local API server: it watches rather than polls, and closes what it opens."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from typing import Any
from urllib.parse import urlsplit

import psutil
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kai_scale.cluster.runner_access import prepare_runner_access
from kai_scale.hooks.cluster import ClusterHook
from kai_scale_model import kai
from localenv.environment import LocalEnvironment
from localenv.node_config import PAUSE_IMAGE
from tests.conftest import REPO
from tests.integration.conftest import TEST_LABEL
from tests.waiting import wait_for

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
# A Queue's share of a resource with neither quota nor limit, as KAI's suite writes it (queue.go).
UNLIMITED = {"quota": -1, "overQuotaWeight": 1, "limit": -1}
# What KAI's suite labels each namespace it creates with (test/e2e/modules/resources/rd/namespace.go).
SUITE_NAMESPACE_LABEL = {"app": "engine-e2e"}


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
        prepare_runner_access(cluster, include_dir=REPO / "include", namespace="kai-scale")
    scope = ["-n", namespace] if namespace else []
    answer = local_env.kubectl("auth", "can-i", verb, resource, *scope, f"--as={RUNNER}", check=False)
    assert answer.strip() == ("yes" if allowed else "no")


def _as_runner(local_env: LocalEnvironment, *args: str, manifest: dict[str, Any] | None = None) -> str:
    """Run kubectl as the runner's ServiceAccount; its error output, empty when the request was allowed."""
    kubectl = [str(local_env.config.bin_dir / "kubectl"), f"--kubeconfig={local_env.config.kubeconfig}"]
    stdin = ["--filename=-"] if manifest else []
    result = subprocess.run(
        [*kubectl, f"--as={RUNNER}", *args, *stdin],
        input=json.dumps(manifest) if manifest else None,
        capture_output=True,
        text=True,
        check=False,
    )
    return "" if result.returncode == 0 else result.stderr


PROBE_CONTAINER = {"name": "probe", "image": PAUSE_IMAGE}


def _job(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "probe", "namespace": namespace},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [PROBE_CONTAINER]}}},
    }


def _namespace_object(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


@pytest.mark.usefixtures("kai")
def test_the_runners_cluster_wide_writes_stay_in_the_suites_namespaces(
    local_env: LocalEnvironment, api_client: client.ApiClient, core: client.CoreV1Api, namespace: str
) -> None:
    """RBAC lets the runner create Jobs and delete namespaces and pods anywhere; its admission policy not.

    Server-side dry runs, so the policy answers and nothing is created or deleted. ``namespace`` is an
    ordinary one; the suite's namespaces carry ``app=engine-e2e``.
    """
    with ClusterHook(conn_id="kubernetes_default") as cluster:
        prepare_runner_access(cluster, include_dir=REPO / "include", namespace="kai-scale")
    suite_namespace = f"kai-probe-{uuid.uuid4().hex[:8]}"
    core.create_namespace(_namespace_object(suite_namespace, {**SUITE_NAMESPACE_LABEL, TEST_LABEL: "true"}))
    try:
        dry_create = ("create", "--dry-run=server")
        refusal = f"kai-scale-runner may not CREATE jobs in namespace {namespace}"
        # A new policy is in force once the API server has loaded it, a moment after it is created.
        wait_for(
            lambda: refusal in _as_runner(local_env, *dry_create, manifest=_job(namespace)),
            timeout=30,
            what="the runner's admission policy to refuse a Job outside the suite's namespaces",
        )
        assert _as_runner(local_env, *dry_create, manifest=_job(suite_namespace)) == ""
        # Creating a namespace stays open (the stand-in suite's marker is one), labelled as the suite's
        # too: what runs there is held to plain pods.
        assert _as_runner(local_env, *dry_create, manifest=_namespace_object("kai-probe-new", {})) == ""
        privileged = _job(suite_namespace)
        privileged["spec"]["template"]["spec"]["containers"] = [
            {**PROBE_CONTAINER, "securityContext": {"privileged": True}}
        ]
        assert "kai-scale-runner may create only plain pods (jobs probe" in _as_runner(
            local_env, *dry_create, manifest=privileged
        )
        host_path = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe", "namespace": "kai-scale"},
            "spec": {
                "containers": [PROBE_CONTAINER],
                "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
            },
        }
        assert "kai-scale-runner may create only plain pods (pods probe" in _as_runner(
            local_env, *dry_create, manifest=host_path
        )
        assert f"kai-scale-runner may not DELETE namespaces {namespace}" in _as_runner(
            local_env, "delete", "namespace", namespace, "--dry-run=server"
        )
        assert _as_runner(local_env, "delete", "namespace", suite_namespace, "--dry-run=server") == ""

        # A delete of a collection is checked for each pod it would remove.
        unschedulable = {"nodeSelector": {"kai-scale.dev/nowhere": "true"}, "containers": [PROBE_CONTAINER]}
        core.create_namespaced_pod(namespace, {"metadata": {"name": "bystander"}, "spec": unschedulable})
        as_runner = client.ApiClient(api_client.configuration)
        as_runner.set_default_header("Impersonate-User", RUNNER)
        with pytest.raises(ApiException) as refused:
            client.CoreV1Api(as_runner).delete_collection_namespaced_pod(namespace)
        assert refused.value.status == 403
        assert f"kai-scale-runner may not DELETE pods in namespace {namespace}" in str(refused.value.body)
        assert core.read_namespaced_pod("bystander", namespace).metadata.deletion_timestamp is None
        # The suite restarts KAI's scheduler by deleting its pods (consolidation spec); no other KAI pod.
        kai_pods = client.CoreV1Api(as_runner)
        kai_pods.delete_collection_namespaced_pod(
            kai.NAMESPACE, label_selector=f"app={kai.SCHEDULER_APP}", dry_run="All"
        )
        with pytest.raises(ApiException) as refused:
            kai_pods.delete_collection_namespaced_pod(
                kai.NAMESPACE, label_selector="app=binder", dry_run="All"
            )
        assert f"kai-scale-runner may not DELETE pods in namespace {kai.NAMESPACE}" in str(refused.value.body)
    finally:
        core.delete_namespace(suite_namespace)


@pytest.mark.usefixtures("kai")
def test_the_runner_deletes_only_the_suites_cluster_wide_objects(
    local_env: LocalEnvironment, api_client: client.ApiClient
) -> None:
    """PriorityClasses stand for the cluster-wide kinds the suite bulk-deletes by its label.

    Queues are the exception: the suite's cleanup deletes every Queue, KAI's default ones included.
    """
    with ClusterHook(conn_id="kubernetes_default") as cluster:
        prepare_runner_access(cluster, include_dir=REPO / "include", namespace="kai-scale")
    probe = f"kai-probe-{uuid.uuid4().hex[:8]}"
    classes = {
        f"{probe}-other": {TEST_LABEL: "true"},
        f"{probe}-suite": {**SUITE_NAMESPACE_LABEL, TEST_LABEL: "true"},
    }
    for name, labels in classes.items():
        priority_class = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name, "labels": labels},
            "value": 1,
        }
        local_env.kubectl("create", "--filename=-", input_text=json.dumps(priority_class))
    queue = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": f"{probe}-queue", "labels": {TEST_LABEL: "true"}},
        "spec": {"resources": dict.fromkeys(("gpu", "cpu", "memory"), UNLIMITED)},
    }
    local_env.kubectl("create", "--filename=-", input_text=json.dumps(queue))
    as_runner = client.ApiClient(api_client.configuration)
    as_runner.set_default_header("Impersonate-User", RUNNER)
    scheduling = client.SchedulingV1Api(as_runner)

    def delete(name: str) -> None:
        # How the suite deletes them (its RBAC grants nothing else): a collection, here of one.
        scheduling.delete_collection_priority_class(field_selector=f"metadata.name={name}", dry_run="All")

    def refused() -> str:
        try:
            delete(f"{probe}-other")
        except ApiException as error:
            return str(error.body)
        return ""

    try:
        wait_for(
            lambda: (
                f"kai-scale-runner may not DELETE priorityclasses {probe}-other: only those of KAI's suite"
                in refused()
            ),
            timeout=30,
            what="the runner's admission policy to refuse deleting a PriorityClass not of the suite",
        )
        delete(f"{probe}-suite")
        # A Queue without the suite's label, as KAI's default ones are: the suite's cleanup deletes it.
        client.CustomObjectsApi(as_runner).delete_cluster_custom_object(
            "scheduling.run.ai", "v2", "queues", f"{probe}-queue", dry_run="All"
        )
    finally:
        local_env.kubectl("delete", "priorityclass", *classes, "--ignore-not-found")
        local_env.kubectl("delete", "queues.scheduling.run.ai", f"{probe}-queue", "--ignore-not-found")


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
