"""Freeing the GPUs before a scenario starts: what earlier scenarios left is removed, nothing else."""

from __future__ import annotations

import time
from collections.abc import Callable

from kai_scale.cluster.manifests import SetupError
from kai_scale.hooks.cluster import ClusterHook
from kai_scale_model import labels
from kai_scale_model.waiting import wait_for

GPU_RESOURCE = "nvidia.com/gpu"
SUITE_NAMESPACES = "app=engine-e2e"


def _ours(labels_of: dict[str, str]) -> bool:
    """A pod our workload made (any run's): it may be removed to free GPUs."""
    return (
        labels_of.get(labels.MANAGED_BY) == labels.MANAGER and labels_of.get(labels.ROLE) == labels.WORKLOAD
    )


def free_gpus(
    cluster: ClusterHook,
    *,
    scenario: str,
    timeout: float = 300,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Make sure no GPU is held before a scenario starts, removing what earlier scenarios left.

    A failed KAI spec can leave its GPU jobs (in the suite's namespaces, ``app=engine-e2e``) and a
    stopped workload its pods; both are removed. GPUs held by anything else are not ours to free:
    the scenario is not run, and the error names the pods.
    """
    holders = cluster.gpu_holders(GPU_RESOURCE)
    if not holders:
        return [f"all {GPU_RESOURCE} free before {scenario}"]
    suite_namespaces = set(cluster.names(api_version="v1", kind="Namespace", selector=SUITE_NAMESPACES))
    foreign = [h for h in holders if not _ours(h.labels) and h.namespace not in suite_namespaces]
    if foreign:
        held = ", ".join(f"{h.namespace}/{h.name} ({h.count})" for h in foreign[:10])
        raise SetupError(
            f"{sum(h.count for h in foreign)} {GPU_RESOURCE} are held by pods this pipeline did not make "
            f"({held}{', ...' if len(foreign) > 10 else ''}): {scenario} would not measure a free cluster. "
            "Remove them, then clear this task"
        )
    # Pods first and at once: they run on KWOK nodes, whose pods no kubelet confirms stopped.
    pods = sum(cluster.delete_pods_now(namespace=name) for name in sorted(suite_namespaces))
    count = cluster.delete_labelled(api_version="v1", kind="Namespace", selector=SUITE_NAMESPACES)
    workload = cluster.delete_pods_now(
        selector=f"{labels.MANAGED_BY}={labels.MANAGER},{labels.ROLE}={labels.WORKLOAD}"
    )
    lines = [
        f"deleted {count} namespaces of KAI's suite left by an earlier scenario ({SUITE_NAMESPACES}), "
        f"with their {pods} pods",
        f"deleted {workload} workload pods left by an earlier scenario",
    ]
    wait_for(
        lambda: sum(h.count for h in cluster.gpu_holders(GPU_RESOURCE)),
        until=lambda held: held == 0,
        what=f"every {GPU_RESOURCE} free",
        timeout=timeout,
        interval=2,
        error=lambda held: SetupError(
            f"{held} {GPU_RESOURCE} still held {timeout:.0f} s after removing the leftovers"
        ),
        clock=clock,
        sleep=sleep,
    )
    return [*lines, f"all {GPU_RESOURCE} free before {scenario}"]
