"""Putting the cluster back after a run: what the run created goes, the installed infrastructure stays."""

from __future__ import annotations

from kai_scale.cluster.inventory import SNAPSHOT_KINDS, kind_key
from kai_scale.cluster.node_pool import NODEPOOL_NAME, restore_node_pool
from kai_scale.hooks.cluster import ClusterHook
from kai_scale_model import labels

# What the setup itself installed carries this role (see cluster.manifests); teardown leaves it.
NOT_INFRASTRUCTURE = f"{labels.ROLE}!={labels.INFRASTRUCTURE}"


def teardown(cluster: ClusterHook, *, run_id: str, existing: dict[str, list[str]] | None) -> list[str]:
    """Remove what the run created and scale the NodePool back.

    What the run created: objects with its labels, and what appeared since the preflight. Installed
    infrastructure (KWOK, operators, monitoring, KAI's tuning) stays for the next run.
    """
    # First, so an unreachable cluster is one clear error rather than a client traceback.
    lines = [f"API server {cluster.server_version()}"]
    run_selector = f"{labels.RUN_ID}={labels.label_value(run_id)}"
    for api_version, kind in (("v1", "Pod"), ("batch/v1", "Job"), ("v1", "Secret")):
        count = cluster.delete_labelled(api_version=api_version, kind=kind, selector=run_selector)
        lines.append(f"deleted {count} {kind}s labelled {run_selector}")
    for api_version, kind in (("v1", "Namespace"), ("scheduling.k8s.io/v1", "PriorityClass")):
        count = cluster.delete_labelled(api_version=api_version, kind=kind, selector="app=engine-e2e")
        lines.append(f"deleted {count} {kind}s of KAI's suite (app=engine-e2e)")
    if existing is None:
        lines.append("no preflight inventory: objects created by a failed suite were not looked for")
    else:
        for api_version, kind in SNAPSHOT_KINDS:
            before = set(existing.get(kind_key(api_version, kind), []))
            if kind == "NodePool":
                before.add(NODEPOOL_NAME)  # the setup's own; scaled back below
            names = cluster.names(api_version=api_version, kind=kind, selector=NOT_INFRASTRUCTURE)
            for name in sorted(set(names) - before):
                cluster.delete(api_version=api_version, kind=kind, name=name)
                lines.append(f"deleted {kind} {name} (created during the run)")
    lines += restore_node_pool(cluster)
    return lines
