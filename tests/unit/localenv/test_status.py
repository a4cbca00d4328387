from __future__ import annotations

from datetime import UTC, datetime

from localenv.runner_kubelet import status

START = datetime(2026, 11, 22, 2, 0, 0, tzinfo=UTC)
END = datetime(2026, 11, 22, 2, 5, 0, tzinfo=UTC)


def _terminated(exit_code: int, **extra: str) -> dict[str, object]:
    return status.terminated(
        container="base",
        image="runner:1",
        pid=42,
        exit_code=exit_code,
        message="boom",
        started=START,
        finished=END,
        **extra,
    )


def test_exit_zero_succeeds_anything_else_fails() -> None:
    assert _terminated(0)["phase"] == "Succeeded"
    failed = _terminated(3)
    assert failed["phase"] == "Failed"
    state = failed["containerStatuses"][0]["state"]["terminated"]  # type: ignore[index]
    assert state == {
        "exitCode": 3,
        "reason": "Error",
        "message": "boom",
        "startedAt": "2026-11-22T02:00:00Z",
        "finishedAt": "2026-11-22T02:05:00Z",
        "containerID": "local://42",
    }


def test_deadline_shows_on_the_pod() -> None:
    body = _terminated(137, pod_reason="DeadlineExceeded", pod_message="too long")
    assert (body["reason"], body["message"]) == ("DeadlineExceeded", "too long")


def test_running_pod_is_ready_with_its_process_as_container() -> None:
    body = status.running(container="base", image="runner:1", pid=7, started=START)
    assert body["phase"] == "Running"
    conditions = {c["type"]: c["status"] for c in body["conditions"]}
    assert conditions["Ready"] == "True"
    assert body["containerStatuses"][0]["containerID"] == "local://7"
