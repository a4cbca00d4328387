"""The tune_kai step over a stand-in for the cluster: patches first, then the operator's rollout awaited.

What the real operator does with the patches is for the integration test; here the stand-in serves
the Deployments a test gives it, poll by poll, and the clock is the test's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest

from kai_scale.cluster.kai_setup import KAI_ROLLOUT_POLL_SECONDS, tune_kai
from kai_scale.cluster.manifests import SetupError
from kai_scale.hooks.cluster import ClusterHook
from tests.clock import Clock
from tests.conftest import REPO
from tests.unit.provider.cluster.kai_deployments import kai_deployment, scale_deployments


class StandInCluster:
    """The calls tune_kai makes, answered from memory; each poll of the Deployments takes the next answer."""

    def __init__(self, *, kai: bool, polls: list[dict[str, dict[str, Any]]]) -> None:
        self.kai = kai
        self.polls: Iterator[dict[str, dict[str, Any]]] = iter(polls)
        self.last = polls[-1] if polls else {}
        self.patched: list[tuple[str, str, dict[str, Any]]] = []
        self.namespaces: list[str] = []

    def crd_exists(self, name: str) -> bool:
        return self.kai and name == "schedulingshards.kai.scheduler"

    def merge_patch(self, *, api_version: str, kind: str, name: str, patch: dict[str, Any]) -> None:
        self.patched.append((kind, name, patch))

    def get(self, *, api_version: str, kind: str, name: str) -> dict[str, Any] | None:
        assert (api_version, kind, name) == ("kai.scheduler/v1", "Config", "kai-config")
        return {"metadata": {"name": name}, "spec": {"global": {}}}

    def deployment_objects(self, namespace: str) -> dict[str, dict[str, Any]]:
        self.namespaces.append(namespace)
        return next(self.polls, self.last)


def _tune(cluster: StandInCluster, clock: Clock, *, profile: str = "scale", timeout: float = 30) -> list[str]:
    return tune_kai(
        cast(ClusterHook, cluster),
        include_dir=REPO / "include",
        profile=profile,
        timeout=timeout,
        clock=clock,
        sleep=clock.sleep,
    )


def _before() -> dict[str, dict[str, Any]]:
    """Namespace kai-scheduler before the operator reconciled: KAI's defaults everywhere."""
    return {name: kai_deployment(name) for name in scale_deployments()}


def test_without_kai_nothing_is_patched_or_awaited() -> None:
    cluster, clock = StandInCluster(kai=False, polls=[]), Clock()
    assert _tune(cluster, clock) == [
        "KAI not installed: nothing to tune (the scenarios that need KAI will not run)"
    ]
    assert (cluster.patched, cluster.namespaces) == ([], [])


def test_the_profile_is_patched_then_its_rollout_awaited() -> None:
    rolling = scale_deployments()
    rolling["binder"]["metadata"]["generation"] = 4  # the operator changed it; not yet observed
    cluster, clock = StandInCluster(kai=True, polls=[_before(), rolling, scale_deployments()]), Clock()
    lines = _tune(cluster, clock)
    assert [(kind, name) for kind, name, _ in cluster.patched] == [
        ("SchedulingShard", "default"),
        ("Config", "kai-config"),
    ]
    assert cluster.patched[1][2]["spec"]["admission"] == {"replicas": 4}
    assert clock.sleeps == [KAI_ROLLOUT_POLL_SECONDS] * 2
    assert cluster.namespaces == ["kai-scheduler"] * 3
    assert lines[0] == f"tuning profile scale ({REPO}/include/manifests/kai-tuning/scale.yaml)"
    assert lines[1:3] == ["patched SchedulingShard default", "patched Config kai-config"]
    assert lines[3] == (
        "KAI's operator rolled tuning profile scale out: kai-scheduler/admission, kai-scheduler/binder, "
        "kai-scheduler/kai-scheduler-default, kai-scheduler/pod-grouper, kai-scheduler/podgroup-controller, "
        "kai-scheduler/queue-controller"
    )
    assert len(lines) == 4


def test_a_rollout_that_never_comes_names_the_deployment_expected_and_seen() -> None:
    cluster, clock = StandInCluster(kai=True, polls=[_before()]), Clock()
    with pytest.raises(SetupError) as raised:
        _tune(cluster, clock, profile="local", timeout=10)
    message = str(raised.value)
    assert message.startswith(
        "KAI's operator did not roll tuning profile local out in namespace kai-scheduler within 10 s: "
    )
    assert "deployment binder, container binder: requests.memory expected 512Mi, seen 256Mi" in message
    assert "arg --max-concurrent-reconciles=100 expected, seen none" in message
    assert "arg --max-consolidation-preemptees=0 expected, seen none" in message
    assert "kubectl -n kai-scheduler get pods" in message
    assert clock.now >= 10
    assert len(clock.sleeps) == 4  # polled at 0, 3, 6, 9 and 12 s: past the deadline, it fails


def test_a_deployment_the_setup_cannot_read_is_an_error_naming_it_and_the_field() -> None:
    unreadable = scale_deployments()
    unreadable["binder"]["spec"]["replicas"] = "many"
    cluster, clock = StandInCluster(kai=True, polls=[unreadable]), Clock()
    with pytest.raises(
        SetupError, match=r"^deployment kai-scheduler/binder as the API served it: 'spec\.replicas' "
    ):
        _tune(cluster, clock)


def test_a_deployment_the_profile_does_not_concern_is_not_read() -> None:
    served = {**scale_deployments(), "someone-elses": {"metadata": {"name": "someone-elses"}, "spec": None}}
    cluster, clock = StandInCluster(kai=True, polls=[served]), Clock()
    assert any(
        line.startswith("KAI's operator rolled tuning profile scale out") for line in _tune(cluster, clock)
    )
