from __future__ import annotations

from typing import Any

from localenv.nodepool_controller import CONTROLLER_LABEL, FAKE_KEY, HASH_KEY, node_for


def _pool(gpus: str = "8") -> dict[str, Any]:
    return {
        "metadata": {"name": "managed-nodepool", "uid": "pool-uid"},
        "spec": {
            "nodeCount": 3,
            "nodeTemplate": {
                "metadata": {"labels": {"type": "kwok"}},
                "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
                "status": {"capacity": {"nvidia.com/gpu": gpus}},
            },
        },
    }


def test_node_carries_kwok_operator_marks_and_the_template() -> None:
    node = node_for(_pool())
    metadata = node["metadata"]
    assert metadata["generateName"] == "managed-nodepool-"
    assert metadata["labels"] == {"type": "kwok", CONTROLLER_LABEL: "managed-nodepool"}
    assert metadata["annotations"][FAKE_KEY] == "fake"
    assert metadata["ownerReferences"][0]["uid"] == "pool-uid"
    assert node["spec"]["taints"] == [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
        {"key": FAKE_KEY, "value": "fake", "effect": "NoSchedule"},
    ]
    assert node["status"] == {"capacity": {"nvidia.com/gpu": "8"}}


def test_template_hash_changes_with_the_template_only() -> None:
    pool = _pool()
    resized = _pool()
    resized["spec"]["nodeCount"] = 500
    same_hash = node_for(pool)["metadata"]["annotations"][HASH_KEY]
    assert node_for(resized)["metadata"]["annotations"][HASH_KEY] == same_hash
    assert node_for(_pool(gpus="4"))["metadata"]["annotations"][HASH_KEY] != same_hash


def test_building_a_node_leaves_the_pool_untouched() -> None:
    pool = _pool()
    node_for(pool)
    assert pool == _pool()
