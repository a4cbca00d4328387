"""The local environment itself, against its real components (kube-apiserver, kwok, Prometheus, moto)."""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from kubernetes import client
from kubernetes.client.rest import ApiException

from localenv import settings
from localenv.environment import LocalEnvironment
from localenv.nodepool_controller import CONTROLLER_LABEL
from tests.waiting import wait_for

RUNNER_IMAGE = "ghcr.io/kai-scale-pipeline/runner:test"


def test_api_server_answers(local_env: LocalEnvironment) -> None:
    assert local_env.kubectl("get", "--raw", "/readyz").strip() == "ok"
    version = json.loads(local_env.kubectl("version", "-o", "json"))
    assert version["serverVersion"]["gitVersion"].startswith("v1.")


def test_up_again_is_harmless(local_env: LocalEnvironment, core: client.CoreV1Api) -> None:
    pool = local_env.kubectl("get", "nodepool", "managed-nodepool", "-o", "jsonpath={.spec.nodeCount}")
    local_env.up(node_count=int(pool))
    assert local_env.is_up()
    assert core.read_node(settings.RUNNER_NODE_NAME).metadata.name == settings.RUNNER_NODE_NAME


@pytest.fixture
def node_pool(local_env: LocalEnvironment, api_client: client.ApiClient) -> Iterator[str]:
    """A NodePool of its own (20 GPU nodes), deleted afterwards together with its nodes."""
    custom = client.CustomObjectsApi(api_client)
    name = f"test-pool-{uuid.uuid4().hex[:6]}"
    gpus = {"cpu": "8", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"}
    body = {
        "apiVersion": "kwok.sigs.run-ai.com/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "nodeCount": 20,
            "nodeTemplate": {
                "metadata": {"labels": {"type": "kwok"}},
                "spec": {},
                "status": {"capacity": gpus, "allocatable": gpus},
            },
        },
    }
    custom.create_cluster_custom_object("kwok.sigs.run-ai.com", "v1beta1", "nodepools", body)
    yield name
    custom.delete_cluster_custom_object("kwok.sigs.run-ai.com", "v1beta1", "nodepools", name)
    core = client.CoreV1Api(api_client)
    wait_for(
        lambda: not core.list_node(label_selector=f"{CONTROLLER_LABEL}={name}").items,
        timeout=60,
        what=f"the nodes of NodePool {name} to be deleted with it",
    )


def _ready_gpu_nodes(core: client.CoreV1Api, pool: str) -> list[client.V1Node]:
    nodes = core.list_node(label_selector=f"{CONTROLLER_LABEL}={pool}").items
    return [
        node
        for node in nodes
        if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
        and (node.status.allocatable or {}).get("nvidia.com/gpu") == "8"
    ]


def test_node_pool_gives_ready_gpu_nodes(
    node_pool: str, core: client.CoreV1Api, api_client: client.ApiClient
) -> None:
    def all_twenty_ready() -> list[client.V1Node] | None:
        ready = _ready_gpu_nodes(core, node_pool)
        return ready if len(ready) == 20 else None

    nodes = wait_for(
        all_twenty_ready,
        timeout=90,
        what=f"20 Ready nodes with 8 GPUs from NodePool {node_pool}",
    )
    node = nodes[0]
    assert node.metadata.name.startswith(f"{node_pool}-")
    assert node.metadata.labels["type"] == "kwok"
    assert node.metadata.annotations["kwok.x-k8s.io/node"] == "fake"
    assert {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"} in [
        {"key": t.key, "value": t.value, "effect": t.effect} for t in node.spec.taints
    ]
    custom = client.CustomObjectsApi(api_client)
    custom.patch_cluster_custom_object(
        "kwok.sigs.run-ai.com", "v1beta1", "nodepools", node_pool, {"spec": {"nodeCount": 5}}
    )
    wait_for(
        lambda: len(core.list_node(label_selector=f"{CONTROLLER_LABEL}={node_pool}").items) == 5,
        timeout=60,
        what="the NodePool to scale down to 5 nodes",
    )
    pool = custom.get_cluster_custom_object("kwok.sigs.run-ai.com", "v1beta1", "nodepools", node_pool)
    available = {c["type"]: c for c in pool["status"]["conditions"]}["Available"]
    assert (available["status"], available["reason"]) == ("True", "Ready")


def _runner_pod(name: str, command: list[str], **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "kai-scale-runner"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "base",
                    "image": RUNNER_IMAGE,
                    "command": command,
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    **container,
                }
            ],
        },
    }


def _wait_default_service_account(core: client.CoreV1Api, namespace: str) -> None:
    def exists() -> bool:
        try:
            return bool(core.read_namespaced_service_account("default", namespace))
        except ApiException:
            return False

    wait_for(exists, timeout=30, what=f"the default ServiceAccount in {namespace}")


def _wait_phase(core: client.CoreV1Api, namespace: str, name: str, phases: set[str]) -> client.V1Pod:
    return wait_for(
        lambda: (pod := core.read_namespaced_pod(name, namespace)).status.phase in phases and pod,
        timeout=60,
        what=f"pod {namespace}/{name} to reach {sorted(phases)}",
    )


def _pod_log(core: client.CoreV1Api, namespace: str, name: str) -> str:
    # Raw bytes: with a preloaded str response, kubernetes 36 returns the repr of the bytes.
    response = core.read_namespaced_pod_log(name, namespace, _preload_content=False)
    return str(response.data.decode())


def test_runner_pod_runs_for_real_and_fails_with_its_message(core: client.CoreV1Api, namespace: str) -> None:
    _wait_default_service_account(core, namespace)
    script = (
        'echo "hello from $POD_NAME with NODE_COUNT=$NODE_COUNT"; echo "spec failed: reclaim" >&2; exit 3'
    )
    pod = _runner_pod(
        "runner-fails",
        ["sh", "-c", script],
        env=[
            {"name": "NODE_COUNT", "value": "500"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
    )
    core.create_namespaced_pod(namespace, pod)
    finished = _wait_phase(core, namespace, "runner-fails", {"Succeeded", "Failed"})
    assert finished.spec.node_name == settings.RUNNER_NODE_NAME
    assert finished.status.phase == "Failed"
    terminated = finished.status.container_statuses[0].state.terminated
    assert terminated.exit_code == 3
    assert terminated.reason == "Error"
    assert "spec failed: reclaim" in terminated.message
    # stdout and stderr are two pipes: their lines reach the log in either order, as in a container.
    log_lines = _pod_log(core, namespace, "runner-fails").splitlines()
    assert sorted(log_lines) == ["hello from runner-fails with NODE_COUNT=500", "spec failed: reclaim"]


def test_runner_pod_talks_to_the_api_as_its_service_account(
    local_env: LocalEnvironment, core: client.CoreV1Api, namespace: str
) -> None:
    """The process gets a kubeconfig with the pod's ServiceAccount token: RBAC applies to it."""
    _wait_default_service_account(core, namespace)
    kubectl = str(local_env.config.bin_dir / "kubectl")
    script = f"{kubectl} auth whoami -o jsonpath='{{.status.userInfo.username}}'; echo; {kubectl} get nodes"
    core.create_namespaced_pod(namespace, _runner_pod("runner-whoami", ["sh", "-c", script]))
    finished = _wait_phase(core, namespace, "runner-whoami", {"Succeeded", "Failed"})
    log = _pod_log(core, namespace, "runner-whoami")
    assert log.splitlines()[0] == f"system:serviceaccount:{namespace}:default"
    assert "forbidden" in log  # the default ServiceAccount may not list nodes
    assert finished.status.phase == "Failed"


def test_deleting_a_runner_pod_stops_its_process(core: client.CoreV1Api, namespace: str) -> None:
    _wait_default_service_account(core, namespace)
    core.create_namespaced_pod(namespace, _runner_pod("runner-sleeps", ["sleep", "600"]))
    running = _wait_phase(core, namespace, "runner-sleeps", {"Running"})
    pid = int(running.status.container_statuses[0].container_id.removeprefix("local://"))
    assert os.path.exists(f"/proc/{pid}")
    core.delete_namespaced_pod("runner-sleeps", namespace, grace_period_seconds=5)

    def gone() -> bool:
        try:
            core.read_namespaced_pod("runner-sleeps", namespace)
        except ApiException as error:
            return bool(error.status == 404)
        return False

    wait_for(gone, timeout=30, what="the deleted runner pod to disappear")
    wait_for(lambda: not os.path.exists(f"/proc/{pid}"), timeout=10, what=f"process {pid} to end")


def test_runner_pod_follows_logs_while_running(core: client.CoreV1Api, namespace: str) -> None:
    _wait_default_service_account(core, namespace)
    script = "for i in 1 2 3; do echo tick $i; sleep 0.3; done"
    core.create_namespaced_pod(namespace, _runner_pod("runner-ticks", ["sh", "-c", script]))
    _wait_phase(core, namespace, "runner-ticks", {"Running", "Succeeded"})
    response = core.read_namespaced_pod_log(
        "runner-ticks", namespace, follow=True, timestamps=True, _preload_content=False
    )
    lines = response.data.decode().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == ["tick 1", "tick 2", "tick 3"]
    assert _wait_phase(core, namespace, "runner-ticks", {"Succeeded", "Failed"}).status.phase == "Succeeded"


def test_unknown_image_cannot_be_pulled_on_the_runner_node(core: client.CoreV1Api, namespace: str) -> None:
    _wait_default_service_account(core, namespace)
    pod = _runner_pod("runner-bad-image", ["true"])
    pod["spec"]["containers"][0]["image"] = "example.invalid/not-the-runner:1"
    core.create_namespaced_pod(namespace, pod)

    def waiting_reason() -> str | None:
        statuses = core.read_namespaced_pod("runner-bad-image", namespace).status.container_statuses or []
        return statuses[0].state.waiting.reason if statuses and statuses[0].state.waiting else None

    assert wait_for(waiting_reason, timeout=30, what="an image pull error") == "ErrImagePull"


def test_workload_pod_is_simulated_running(
    local_env: LocalEnvironment, core: client.CoreV1Api, namespace: str, node_pool: str
) -> None:
    wait_for(lambda: len(_ready_gpu_nodes(core, node_pool)) == 20, timeout=90, what="the GPU nodes")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpu-job"},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {CONTROLLER_LABEL: node_pool},
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {"name": "job", "image": "ubuntu", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
        },
    }
    core.create_namespaced_pod(namespace, pod)
    running = _wait_phase(core, namespace, "gpu-job", {"Running"})
    assert running.spec.node_name.startswith(node_pool)
    assert {c.type: c.status for c in running.status.conditions}["Ready"] == "True"
    # Nothing completes it: KAI's setup removes the pod-complete stage, and so does localenv.
    stages = json.loads(local_env.kubectl("get", "stages", "-o", "json"))["items"]
    assert "pod-complete" not in {stage["metadata"]["name"] for stage in stages}


def test_prometheus_scrapes_the_api_server(local_env: LocalEnvironment) -> None:
    url = f"{local_env.config.prometheus_url}/api/v1/query?" + urllib.parse.urlencode(
        {"query": "sum by (job) (apiserver_request_total)"}
    )

    def series() -> list[dict[str, Any]]:
        with urllib.request.urlopen(url, timeout=5) as response:
            return list(json.load(response)["data"]["result"])

    result = wait_for(series, timeout=90, what="an apiserver_request_total series in Prometheus", interval=2)
    assert float(result[0]["value"][1]) > 0


def test_s3_endpoint_rejects_a_stale_if_match(local_env: LocalEnvironment) -> None:
    s3 = local_env.s3_client()
    key = f"tests/{uuid.uuid4().hex}/manifest.json"
    bucket = settings.DEFAULT_BUCKET
    first = s3.put_object(Bucket=bucket, Key=key, Body=b'{"runs": []}', IfNoneMatch="*")
    with pytest.raises(ClientError) as exists:
        s3.put_object(Bucket=bucket, Key=key, Body=b"again", IfNoneMatch="*")
    assert exists.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    s3.put_object(Bucket=bucket, Key=key, Body=b'{"runs": [1]}', IfMatch=first["ETag"])
    with pytest.raises(ClientError) as stale:
        s3.put_object(Bucket=bucket, Key=key, Body=b'{"runs": [2]}', IfMatch=first["ETag"])
    assert stale.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b'{"runs": [1]}'


def test_runner_pod_past_its_deadline_is_stopped_and_failed(core: client.CoreV1Api, namespace: str) -> None:
    _wait_default_service_account(core, namespace)
    pod = _runner_pod("runner-too-long", ["sleep", "600"])
    pod["spec"]["activeDeadlineSeconds"] = 2
    pod["spec"]["terminationGracePeriodSeconds"] = 1
    core.create_namespaced_pod(namespace, pod)
    finished = _wait_phase(core, namespace, "runner-too-long", {"Succeeded", "Failed"})
    assert finished.status.phase == "Failed"
    assert finished.status.reason == "DeadlineExceeded"
    assert finished.status.container_statuses[0].state.terminated.exit_code == 143  # SIGTERM
