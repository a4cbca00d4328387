"""The run's simulated nodes: kwok-operator's managed-nodepool, sized for the run and put back after it."""

from __future__ import annotations

from pathlib import Path

from kai_scale.cluster.gpus import GPU_RESOURCE
from kai_scale.cluster.manifests import SetupError, apply_release, load_manifest, wait_for_crd
from kai_scale.cluster.placement import Placement
from kai_scale.cluster.sources import Sources
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.hooks.release_manifests import ReleaseManifestsHook
from kai_scale_model.installs import Installs
from kai_scale_model.node_pool import NODEPOOL, NODEPOOL_CRD
from kai_scale_model.waiting import wait_for

NODEPOOL_NAME = "managed-nodepool"
POOL_NODE_LABEL = "kwok.x-k8s.io/controller"  # kwok-operator labels a pool's nodes with its name
ORIGINAL_COUNT_ANNOTATION = "kai-scale.dev/original-node-count"
POOL_DELETION_TIMEOUT_SECONDS = 300


def size_node_pool(
    cluster: ClusterHook,
    *,
    releases: ReleaseManifestsHook,
    installs: Installs,
    sources: Sources,
    placement: Placement,
    include_dir: Path,
    node_count: int,
) -> list[str]:
    """kwok-operator (if missing) and managed-nodepool at ``node_count``; remembers the count to restore."""
    lines = []
    if not cluster.crd_exists(NODEPOOL_CRD):
        operator = installs.kwok_operator
        apply_release(cluster, operator.manifests, releases=releases, sources=sources, placement=placement)
        wait_for_crd(cluster, NODEPOOL_CRD, owner="kwok-operator")
        lines.append(f"installed kwok-operator {operator.version}")
    current = cluster.get(api_version=NODEPOOL[0], kind=NODEPOOL[1], name=NODEPOOL_NAME)
    annotations = dict(((current or {}).get("metadata") or {}).get("annotations") or {})
    # Recorded once per run: a re-run setup (a retried scenario) must not record the run's own size.
    original = annotations.get(ORIGINAL_COUNT_ANNOTATION)
    if original is None:
        original = str(current["spec"]["nodeCount"]) if current else "absent"
    pool = load_manifest(include_dir, "managed-nodepool.yaml")[0]
    pool["spec"]["nodeCount"] = node_count
    pool["metadata"].setdefault("annotations", {})[ORIGINAL_COUNT_ANNOTATION] = original
    cluster.apply([pool])
    lines.append(f"NodePool {NODEPOOL_NAME}: {node_count} nodes (was {original})")
    return lines


def wait_for_nodes(cluster: ClusterHook, *, node_count: int, timeout: float | None = None) -> list[str]:
    """Wait until the NodePool's nodes are Ready with GPUs allocatable (a watch, not a poll)."""
    deadline_seconds = timeout if timeout is not None else 300 + 0.1 * node_count
    total, ready = cluster.wait_for_ready_nodes(
        selector=f"{POOL_NODE_LABEL}={NODEPOOL_NAME}",
        resource=GPU_RESOURCE,
        count=node_count,
        timeout_seconds=deadline_seconds,
    )
    if ready >= node_count:
        return [f"{ready} nodes Ready with {GPU_RESOURCE}"]
    raise SetupError(
        f"only {ready} of {node_count} nodes of NodePool {NODEPOOL_NAME} are Ready with {GPU_RESOURCE} "
        f"after {deadline_seconds:.0f} s ({total} exist); check kwok-operator, KWOK and the fake GPU operator"
    )


def _delete_node_pool(cluster: ClusterHook, *, node_count: int) -> None:
    """Delete managed-nodepool and wait until neither it nor a node of it is left.

    The next run must meet neither: kwok-operator counts every node with the pool's label as its own.
    kwok-operator 1.0.1 does not delete a pool well: the deletion bumps the pool's generation, so it
    deletes the pool's nodes, makes them again and leaves them to the garbage collector (3 writes a
    node); and a pool of 0 nodes it never deletes, failing a status update forever. So the pool is
    emptied first, then deleted without its finalizer, which then guards nothing.
    """
    pool_nodes = f"{POOL_NODE_LABEL}={NODEPOOL_NAME}"
    if node_count:
        cluster.merge_patch(
            api_version=NODEPOOL[0], kind=NODEPOOL[1], name=NODEPOOL_NAME, patch={"spec": {"nodeCount": 0}}
        )
    # As long as wait_for_nodes gives them to appear: the operator deletes one node per API call.
    timeout = POOL_DELETION_TIMEOUT_SECONDS + 0.1 * node_count
    wait_for(
        lambda: cluster.names(api_version="v1", kind="Node", selector=pool_nodes),
        until=lambda nodes: not nodes,
        what=f"the nodes of NodePool {NODEPOOL_NAME} deleted",
        timeout=timeout,
        interval=2,
        error=lambda _: SetupError(
            f"NodePool {NODEPOOL_NAME}, scaled to 0 to be deleted, still has nodes ({pool_nodes}) "
            f"after {timeout:.0f} s: check kwok-operator's log"
        ),
    )
    cluster.delete(api_version=NODEPOOL[0], kind=NODEPOOL[1], name=NODEPOOL_NAME)
    cluster.drop_finalizers(api_version=NODEPOOL[0], kind=NODEPOOL[1], name=NODEPOOL_NAME)


def restore_node_pool(cluster: ClusterHook) -> list[str]:
    """managed-nodepool back at the size it had before the run: deleted when the run created it."""
    pool = cluster.get(api_version=NODEPOOL[0], kind=NODEPOOL[1], name=NODEPOOL_NAME)
    if pool is None:
        return [f"NodePool {NODEPOOL_NAME} absent"]
    original = ((pool.get("metadata") or {}).get("annotations") or {}).get(ORIGINAL_COUNT_ANNOTATION)
    if original is None:
        return [f"NodePool {NODEPOOL_NAME}: no original size recorded, left at {pool['spec']['nodeCount']}"]
    if original == "absent":
        _delete_node_pool(cluster, node_count=int(pool["spec"]["nodeCount"]))
        return [f"NodePool {NODEPOOL_NAME} deleted (the run created it)"]
    cluster.merge_patch(
        api_version=NODEPOOL[0],
        kind=NODEPOOL[1],
        name=NODEPOOL_NAME,
        patch={
            "metadata": {"annotations": {ORIGINAL_COUNT_ANNOTATION: None}},
            "spec": {"nodeCount": int(original)},
        },
    )
    return [f"NodePool {NODEPOOL_NAME} scaled back to {original} nodes"]
