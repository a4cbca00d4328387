"""The local environment itself, against its real components (kube-apiserver, KWOK, moto).

The real node and the pods it runs: test_real_node.py.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError
from kubernetes import client

from localenv import settings
from localenv.environment import LocalEnvironment
from localenv.node_config import NODE_NAME
from tests.waiting import wait_for

# kwok-operator labels each node with its NodePool.
CONTROLLER_LABEL = "kwok.x-k8s.io/controller"


def test_api_server_answers(local_env: LocalEnvironment) -> None:
    assert local_env.kubectl("get", "--raw", "/readyz").strip() == "ok"
    version = json.loads(local_env.kubectl("version", "-o", "json"))
    assert version["serverVersion"]["gitVersion"].startswith("v1.")


def test_up_again_is_harmless(local_env: LocalEnvironment, core: client.CoreV1Api) -> None:
    local_env.up(node_count=0)
    assert local_env.is_up()
    assert core.read_node(NODE_NAME).metadata.name == NODE_NAME


@pytest.fixture
def node_pool(prepared_cluster: None, api_client: client.ApiClient) -> Iterator[str]:
    """A NodePool of its own (20 GPU nodes, from its template), deleted afterwards with its nodes.

    The real kwok-operator makes them: the setup installed it.
    """
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
    running = wait_for(
        lambda: (pod := core.read_namespaced_pod("gpu-job", namespace)).status.phase == "Running" and pod,
        timeout=60,
        what="the GPU pod to run on a KWOK node",
    )
    assert running.spec.node_name.startswith(node_pool)
    assert {c.type: c.status for c in running.status.conditions}["Ready"] == "True"
    # Nothing completes it: KAI's setup removes the pod-complete stage, and so does the pipeline's.
    stages = json.loads(local_env.kubectl("get", "stages", "-o", "json"))["items"]
    assert "pod-complete" not in {stage["metadata"]["name"] for stage in stages}


def test_s3_endpoint_rejects_a_stale_if_match(local_env: LocalEnvironment) -> None:
    s3 = local_env.s3().client()
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
