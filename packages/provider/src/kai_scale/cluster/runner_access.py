"""What the runner pods need to run: their namespace, ServiceAccount, RBAC and admission policy."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from kai_scale.cluster.manifests import load_manifest
from kai_scale.hooks.cluster import ClusterHook


def prepare_runner_access(cluster: ClusterHook, *, include_dir: Path, namespace: str) -> list[str]:
    """The runner pods' namespace, ServiceAccount, RBAC and admission policy (runner-rbac.yaml)."""
    objects = in_runner_namespace(load_manifest(include_dir, "runner-rbac.yaml"), namespace)
    return [f"applied {name}" for name in cluster.apply(objects)]


def in_runner_namespace(objects: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """runner-rbac.yaml's objects moved to the deployment's runner namespace (KAI_SCALE_NAMESPACE)."""
    moved = copy.deepcopy(objects)
    for item in moved:
        metadata = item["metadata"]
        if item["kind"] == "Namespace":
            metadata["name"] = namespace
        elif "namespace" in metadata:
            metadata["namespace"] = namespace
        for subject in item.get("subjects", []):
            if subject["kind"] == "ServiceAccount":
                subject["namespace"] = namespace
    return moved
