"""What the scenario task says when its runner pod ends badly."""

from __future__ import annotations

from datetime import timedelta

from kubernetes.client import models as k8s

from kai_scale.operators.scenario_pod import container_exit_code, scenario_task_error, stopped_at_its_deadline


def _pod(*statuses: k8s.V1ContainerStatus) -> k8s.V1Pod:
    return k8s.V1Pod(status=k8s.V1PodStatus(container_statuses=list(statuses)))


def _status(name: str, state: k8s.V1ContainerState) -> k8s.V1ContainerStatus:
    return k8s.V1ContainerStatus(name=name, image="i", image_id="", ready=False, restart_count=0, state=state)


def test_the_exit_code_is_the_base_containers_once_terminated() -> None:
    terminated = k8s.V1ContainerState(terminated=k8s.V1ContainerStateTerminated(exit_code=3))
    running = k8s.V1ContainerState(running=k8s.V1ContainerStateRunning())
    pod = _pod(
        _status("sidecar", k8s.V1ContainerState(terminated=k8s.V1ContainerStateTerminated(exit_code=0)))
    )
    assert container_exit_code(_pod(_status("base", terminated)), "base") == 3
    assert container_exit_code(_pod(_status("base", running)), "base") is None
    assert container_exit_code(pod, "base") is None, "another container's exit code is not the runner's"
    assert container_exit_code(k8s.V1Pod(), "base") is None
    assert container_exit_code(None, "base") is None, "the pod was never created"


def test_the_error_says_whether_the_scenario_failed_or_did_not_run() -> None:
    said = "Pod runner-topology returned a failure.\nscenario topology: not_run: KAI not installed"
    assert (
        scenario_task_error(scenario="topology", exit_code=3, error=said)
        == f"scenario topology did not run: {said}"
    )
    assert (
        scenario_task_error(scenario="reclaim", exit_code=1, error="boom") == "scenario reclaim failed: boom"
    )
    assert scenario_task_error(scenario="reclaim", exit_code=None, error="no pod") == (
        "scenario reclaim failed: no pod"
    )


def test_a_pod_stopped_at_its_deadline_is_told_from_one_that_failed() -> None:
    """The reason the kubelet gives a pod past its activeDeadlineSeconds (the scenario's timeout)."""

    def failed(reason: str | None) -> k8s.V1Pod:
        return k8s.V1Pod(status=k8s.V1PodStatus(phase="Failed", reason=reason))

    assert stopped_at_its_deadline(failed("DeadlineExceeded"))
    assert not stopped_at_its_deadline(failed("Evicted"))
    assert not stopped_at_its_deadline(failed(None))
    assert not stopped_at_its_deadline(k8s.V1Pod())
    assert not stopped_at_its_deadline(None), "the pod was never created"


def test_the_error_of_a_scenario_stopped_at_its_timeout_names_the_timeout_first() -> None:
    said = "Pod runner-hangs returned a failure.\nstand-in suite: mode=hang"
    assert scenario_task_error(
        scenario="hangs", exit_code=None, error=said, timed_out_after=timedelta(minutes=90)
    ) == (f"scenario hangs failed: stopped at its timeout (1h30m): {said}")
