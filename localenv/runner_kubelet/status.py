"""Pod status bodies, shaped as the kubelet reports them, for each step of a runner pod's life."""

from __future__ import annotations

from datetime import datetime
from typing import Any

LOCAL_IP = "127.0.0.1"
JsonDict = dict[str, Any]


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _conditions(now: datetime, *, ready: bool, reason: str | None = None) -> list[JsonDict]:
    def condition(kind: str, status: bool) -> JsonDict:
        body: JsonDict = {"type": kind, "status": str(status), "lastTransitionTime": _time(now)}
        if not status and reason:
            body["reason"] = reason
        return body

    return [
        condition("PodReadyToStartContainers", True),
        condition("Initialized", True),
        condition("ContainersReady", ready),
        condition("Ready", ready),
        condition("PodScheduled", True),
    ]


def waiting(*, container: str, image: str, reason: str, message: str, now: datetime) -> JsonDict:
    """A pod whose container cannot start (for example, an image with no local stand-in)."""
    return {
        "phase": "Pending",
        "hostIP": LOCAL_IP,
        "startTime": _time(now),
        "conditions": _conditions(now, ready=False, reason="ContainersNotReady"),
        "containerStatuses": [
            {
                "name": container,
                "image": image,
                "imageID": "",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": reason, "message": message}},
            }
        ],
    }


def running(*, container: str, image: str, pid: int, started: datetime) -> JsonDict:
    """A pod whose container's process is running."""
    return {
        "phase": "Running",
        "hostIP": LOCAL_IP,
        "podIP": LOCAL_IP,
        "podIPs": [{"ip": LOCAL_IP}],
        "startTime": _time(started),
        "conditions": _conditions(started, ready=True),
        "containerStatuses": [
            {
                "name": container,
                "image": image,
                "imageID": f"local://{image}",
                "containerID": f"local://{pid}",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": _time(started)}},
            }
        ],
    }


def terminated(
    *,
    container: str,
    image: str,
    pid: int,
    exit_code: int,
    message: str,
    started: datetime,
    finished: datetime,
    pod_reason: str | None = None,
    pod_message: str | None = None,
) -> JsonDict:
    """A pod whose container has exited: Succeeded on exit code 0, else Failed."""
    state: JsonDict = {
        "exitCode": exit_code,
        "reason": "Completed" if exit_code == 0 else "Error",
        "startedAt": _time(started),
        "finishedAt": _time(finished),
        "containerID": f"local://{pid}",
    }
    if message:
        state["message"] = message
    body: JsonDict = {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "conditions": _conditions(finished, ready=False, reason="PodCompleted"),
        "containerStatuses": [
            {
                "name": container,
                "image": image,
                "imageID": f"local://{image}",
                "containerID": f"local://{pid}",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {"terminated": state},
            }
        ],
    }
    if pod_reason:
        body["reason"] = pod_reason
    if pod_message:
        body["message"] = pod_message
    return body


def failed_unsupported(*, reason: str, message: str, now: datetime) -> JsonDict:
    """A pod the runner node refuses outright (a shape the kubelet double does not run)."""
    return {
        "phase": "Failed",
        "reason": reason,
        "message": message,
        "startTime": _time(now),
        "conditions": _conditions(now, ready=False, reason="PodFailed"),
    }


def lost_pod_status() -> JsonDict:
    """A pod whose process was lost when the node's agent restarted (restartPolicy Never: it stays failed)."""
    return {
        "phase": "Failed",
        "reason": "NodeAgentRestarted",
        "message": "the runner node's agent restarted while this pod ran; its process is gone",
    }
