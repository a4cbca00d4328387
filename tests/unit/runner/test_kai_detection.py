from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kubernetes.client import V1ObjectMeta, V1Pod, V1PodCondition, V1PodList, V1PodStatus
from kubernetes.client.rest import ApiException

from kai_scale_model import kai
from kai_scale_runner.kai_detection import (
    kai_not_ready_reason,
    scheduler_not_serving_reason,
    serving,
)


def _pod(name: str, phase: str | None, *, ready: bool = True, deleting: bool = False) -> V1Pod:
    return V1Pod(
        metadata=V1ObjectMeta(
            name=name, deletion_timestamp=datetime(2026, 1, 1, tzinfo=UTC) if deleting else None
        ),
        status=None
        if phase is None
        else V1PodStatus(
            phase=phase, conditions=[V1PodCondition(type="Ready", status="True" if ready else "False")]
        ),
    )


class _Extensions:
    def __init__(self, status: int | None) -> None:
        self.status = status

    def read_custom_resource_definition(self, name: str) -> object:
        assert name == kai.QUEUE_CRD
        if self.status is not None:
            raise ApiException(status=self.status)
        return object()


class _Core:
    """The scheduler's pods as each list call finds them, the last one from then on."""

    def __init__(self, *answers: list[V1Pod]) -> None:
        self.answers = list(answers)
        self.calls = 0

    def list_namespaced_pod(self, namespace: str, *, label_selector: str) -> V1PodList:
        assert (namespace, label_selector) == (kai.NAMESPACE, f"app={kai.SCHEDULER_APP}")
        self.calls += 1
        return V1PodList(items=self.answers.pop(0) if len(self.answers) > 1 else self.answers[0])


def test_a_serving_pod_is_running_ready_and_not_being_deleted() -> None:
    assert serving(_pod("s", "Running"))
    assert not serving(_pod("s", "Running", ready=False))
    assert not serving(_pod("s", "Running", deleting=True))
    assert not serving(_pod("s", "Pending", ready=False))
    assert not serving(_pod("s", None))


def test_the_reason_names_each_pod_and_its_state() -> None:
    reason = scheduler_not_serving_reason(
        [
            _pod("a", "Pending", ready=False),
            _pod("b", "Running", ready=False),
            _pod("c", "Running", deleting=True),
            _pod("d", None),
        ]
    )
    assert reason == (
        "KAI not ready: its scheduler is not serving (no running, ready pod app=kai-scheduler-default in "
        "namespace kai-scheduler; pods: a (Pending), b (Running, not ready), c (Running, being deleted), "
        "d (no status))"
    )
    assert (scheduler_not_serving_reason([]) or "").endswith("pods: none)")
    assert scheduler_not_serving_reason([_pod("a", "Pending", ready=False), _pod("b", "Running")]) is None


def test_kai_without_its_queue_crd_is_not_installed_and_no_pod_is_looked_at() -> None:
    core = _Core([])
    reason = kai_not_ready_reason(extensions=_Extensions(404), core=core)
    assert reason == "KAI not installed: CRD queues.scheduling.run.ai not found"
    assert core.calls == 0


def test_an_api_error_other_than_not_found_is_raised() -> None:
    with pytest.raises(ApiException):
        kai_not_ready_reason(extensions=_Extensions(403), core=_Core([]))


def test_installed_and_serving_is_ready() -> None:
    assert kai_not_ready_reason(extensions=_Extensions(None), core=_Core([_pod("s", "Running")])) is None


def test_a_scheduler_that_comes_up_within_the_timeout_is_waited_for() -> None:
    core = _Core([], [_pod("s", "Pending", ready=False)], [_pod("s", "Running")])
    assert kai_not_ready_reason(extensions=_Extensions(None), core=core, timeout=60, poll=0) is None
    assert core.calls == 3


def test_a_scheduler_that_never_serves_is_not_ready_at_the_timeout() -> None:
    core = _Core([_pod("s", "Running", ready=False)])
    reason = kai_not_ready_reason(extensions=_Extensions(None), core=core, timeout=0)
    assert (reason or "").startswith("KAI not ready: its scheduler is not serving")
    assert "s (Running, not ready)" in (reason or "")
    assert core.calls == 1
