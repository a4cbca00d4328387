"""What KAI's Deployments must show once its operator has rolled a tuning profile out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from kai_scale.cluster.kai_rollout import (
    Deployment,
    ExpectedDeployment,
    KaiConfig,
    expected_deployments,
    operand_names,
    rollout_problems,
    unchecked_fields,
)
from kai_scale.cluster.kai_tuning import TuningPatch, load_profile
from tests.conftest import REPO
from tests.unit.provider.cluster.kai_deployments import kai_deployment, scale_deployments

SCALE = load_profile(REPO / "include", "scale").patches
PYROSCOPE = "http://pyroscope.monitoring.svc.cluster.local.:4040"


def _problems(expected: ExpectedDeployment, served: dict[str, Any] | None) -> list[str]:
    """rollout_problems of a Deployment as the API serves it (JSON field names), read as tune_kai reads it."""
    return rollout_problems(expected, None if served is None else Deployment.model_validate(served))


def _expected(patches: Sequence[TuningPatch] = SCALE) -> dict[str, ExpectedDeployment]:
    return {e.name: e for e in expected_deployments(patches, scheduler_name="kai-scheduler")}


def test_the_scale_profile_names_each_deployment_as_the_operator_does() -> None:
    expected = _expected()
    assert list(expected) == [
        "admission",
        "binder",
        "kai-scheduler-default",
        "pod-grouper",
        "podgroup-controller",
        "queue-controller",
    ]
    assert expected["binder"].args == ("--max-concurrent-reconciles=100",)
    assert expected["binder"].resources == {
        "requests": {"cpu": "100m", "memory": "2500Mi"},
        "limits": {"cpu": "400m", "memory": "2500Mi"},
    }
    scheduler = expected["kai-scheduler-default"]
    assert scheduler.args == ("--max-consolidation-preemptees=0", f"--pyroscope-address={PYROSCOPE}")
    assert scheduler.resources["requests"] == {"cpu": "3", "memory": "7Gi"}
    assert (expected["admission"].replicas, expected["admission"].resources) == (4, {})
    assert expected["binder"].replicas is None


def test_the_local_profile_expects_its_own_sizes_and_the_same_args() -> None:
    local = _expected(load_profile(REPO / "include", "local").patches)
    scale = _expected()
    assert list(local) == list(scale)
    for name, expected in local.items():
        assert expected.args == scale[name].args, name
    assert local["admission"].replicas == 1
    assert local["kai-scheduler-default"].resources["requests"] == {"cpu": "250m", "memory": "1Gi"}


def test_the_scheduler_deployment_is_named_by_the_configs_scheduler_name_and_the_shard() -> None:
    config = {"spec": {"namespace": "kai", "global": {"schedulerName": "kai-sched"}}}
    namespace, scheduler_name = operand_names(KaiConfig.model_validate(config))
    assert (namespace, scheduler_name) == ("kai", "kai-sched")
    assert operand_names(None) == ("kai-scheduler", "kai-scheduler")
    assert operand_names(KaiConfig.model_validate({"spec": {"global": {}}})) == (
        "kai-scheduler",
        "kai-scheduler",
    )
    assert operand_names(KaiConfig.model_validate({"kind": "Config"})) == ("kai-scheduler", "kai-scheduler")
    names = [e.name for e in expected_deployments(SCALE, scheduler_name=scheduler_name)]
    assert "kai-sched-default" in names
    # Scheduler resources without a shard patch: the default shard's Deployment.
    config_only = [p for p in SCALE if p.kind == "Config"]
    scheduler = {e.name: e for e in expected_deployments(config_only, scheduler_name="kai-scheduler")}
    assert scheduler["kai-scheduler-default"].args == ()


def test_a_rolled_out_profile_has_no_problems() -> None:
    deployments = scale_deployments()
    for name, expected in _expected().items():
        assert _problems(expected, deployments[name]) == [], name


def test_quantities_compare_by_value() -> None:
    expected = _expected()["kai-scheduler-default"]
    deployment = scale_deployments()["kai-scheduler-default"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["requests"]["cpu"] = "3000m"
    container["resources"]["limits"]["memory"] = str(7 * 1024**3)
    assert _problems(expected, deployment) == []


def test_the_values_before_the_operator_reconciled_are_named_expected_and_seen() -> None:
    before = kai_deployment(
        "binder", args=["--scheduler-name", "kai-scheduler", "--max-concurrent-reconciles=10"]
    )
    assert _problems(_expected()["binder"], before) == [
        "deployment binder, container binder: limits.cpu expected 400m, seen 100m",
        "deployment binder, container binder: limits.memory expected 2500Mi, seen 512Mi",
        "deployment binder, container binder: requests.cpu expected 100m, seen 50m",
        "deployment binder, container binder: requests.memory expected 2500Mi, seen 256Mi",
        "deployment binder, container binder: arg --max-concurrent-reconciles=100 expected, "
        "seen --max-concurrent-reconciles=10",
    ]


def test_a_scheduler_flag_the_operator_dropped_is_seen_as_none() -> None:
    deployment = scale_deployments()["kai-scheduler-default"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [arg for arg in container["args"] if not arg.startswith("--pyroscope-address")]
    assert _problems(_expected()["kai-scheduler-default"], deployment) == [
        "deployment kai-scheduler-default, container kai-scheduler-default: "
        f"arg --pyroscope-address={PYROSCOPE} expected, seen none"
    ]


def test_replicas_are_compared_where_the_profile_sets_them() -> None:
    assert _problems(_expected()["admission"], kai_deployment("admission", replicas=1)) == [
        "deployment admission: replicas expected 4, seen 1"
    ]


@pytest.mark.parametrize(
    ("status", "problem"),
    [
        ({"generation": 4, "observed": 3}, "generation 4 not yet observed (observed 3)"),
        ({"updated": 0}, "0 of 4 replicas updated"),
        ({"updated": 2, "available": 2}, "2 of 4 replicas updated"),
        ({"current": 6}, "2 old replicas pending termination"),
        ({"available": 3}, "3 of 4 updated replicas available"),
        ({"available": 0}, "0 of 4 updated replicas available"),
    ],
)
def test_a_rollout_is_finished_as_kubectl_rollout_status_judges_it(
    status: dict[str, int], problem: str
) -> None:
    deployment = kai_deployment(
        "admission",
        replicas=4,
        generation=status.get("generation", 3),
        observed=status.get("observed"),
        updated=status.get("updated"),
        current=status.get("current"),
        available=status.get("available"),
    )
    assert _problems(_expected()["admission"], deployment) == [f"deployment admission: {problem}"]


def test_a_missing_deployment_or_container_is_named() -> None:
    (missing,) = _problems(_expected()["binder"], None)
    assert missing.startswith("deployment binder: not found")
    assert "service.enabled false" in missing
    renamed = kai_deployment("binder")
    renamed["spec"]["template"]["spec"]["containers"][0]["name"] = "manager"
    assert _problems(_expected()["binder"], renamed)[0] == (
        "deployment binder: no container binder (seen: manager)"
    )


def test_every_setting_of_the_shipped_profiles_is_compared() -> None:
    assert unchecked_fields(SCALE) == []
    assert unchecked_fields(load_profile(REPO / "include", "local").patches) == []


def test_settings_no_deployment_shows_are_named() -> None:
    patches = [
        TuningPatch.model_validate({"apiVersion": "kai.scheduler/v1", **patch})
        for patch in (
            {"kind": "Config", "name": "kai-config", "patch": {"spec": {"global": {"schedulerName": "s"}}}},
            {
                "kind": "SchedulingShard",
                "name": "default",
                "patch": {"spec": {"goMemLimitRatio": 0.8, "args": {"a": "1"}}},
            },
            {
                "kind": "Config",
                "name": "kai-config",
                "patch": {"spec": {"podGrouper": {"maxConcurrentReconciles": 5, "replicas": 2}}},
            },
        )
    ]
    assert unchecked_fields(patches) == [
        "Config kai-config spec.global.schedulerName",
        "SchedulingShard default spec.goMemLimitRatio",
        "Config kai-config spec.podGrouper.maxConcurrentReconciles",
    ]
