"""include/manifests/runner-rbac.yaml placed in the deployment's runner namespace (KAI_SCALE_NAMESPACE)."""

from __future__ import annotations

import json

from kai_scale.cluster.manifests import load_manifest
from kai_scale.cluster.runner_access import in_runner_namespace
from tests.conftest import REPO


def test_every_namespaced_object_and_binding_moves_to_the_runner_namespace() -> None:
    shipped = load_manifest(REPO / "include", "runner-rbac.yaml")
    moved = in_runner_namespace(shipped, "nightly-scale")

    (namespace,) = [item for item in moved if item["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == "nightly-scale"
    namespaced = [item for item in moved if "namespace" in item["metadata"]]
    assert {item["kind"] for item in namespaced} == {"ServiceAccount", "Role", "RoleBinding"}
    assert all(item["metadata"]["namespace"] == "nightly-scale" for item in namespaced)
    subjects = [subject for item in moved for subject in item.get("subjects", [])]
    assert len(subjects) == 2
    assert all(subject["namespace"] == "nightly-scale" for subject in subjects)
    assert '"kai-scale"' not in json.dumps(moved), "no object is left in the default namespace"
    assert "kai-scale-runner-scope" in {item["metadata"]["name"] for item in moved}
    assert '"namespace": "kai-scale"' in json.dumps(shipped), "the manifest itself is not changed"
