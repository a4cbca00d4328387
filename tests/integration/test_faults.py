"""Faults a nightly run meets on a real cluster, staged on the local environment.

Each test breaks one real component while the shipped pipeline runs (the API server restarting, the
S3 endpoint hanging) and checks that nothing is lost: the outputs complete, the manifest holds one
entry for the run, and the log says what happened. The table of outcomes is in
docs/reliability.md.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from localenv.environment import LocalEnvironment
from tests.integration.airflow_env import include_dir_with, nightly_dag, published_run, standin_scenario
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("kai", "airflow_on_local_env")

API_SERVER_DOWN_SECONDS = 20
S3_DOWN_SECONDS = 60


def _in_background(action: Callable[[], None]) -> threading.Thread:
    """Run ``action`` beside the DAG run (which dag.test runs in this thread); re-raised by _join."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            action()
        except BaseException as error:  # reported by the test, not lost in the thread
            errors.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    return thread


def _join(thread: threading.Thread) -> None:
    thread.join(timeout=300)
    errors: list[BaseException] = thread.errors  # type: ignore[attr-defined]
    if errors:
        raise errors[0]


def _exited(proc: Path) -> bool:
    """Gone, or a zombie (kwokctl started it detached; nothing may reap it here)."""
    try:
        return (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def restart_api_server(local_env: LocalEnvironment, *, down_seconds: float) -> None:
    """Stop kube-apiserver, keep it down, start it again with the same command, as kwokctl had it."""
    cluster_dir = local_env.config.kwok_workdir / "clusters" / "kai-scale"
    pid_file = cluster_dir / "pids" / "kube-apiserver.pid"
    pid = int(pid_file.read_text())
    proc = Path(f"/proc/{pid}")
    argv = [part.decode() for part in (proc / "cmdline").read_bytes().split(b"\0") if part]
    cwd = os.readlink(proc / "cwd")
    environ = dict(
        line.decode().split("=", 1) for line in (proc / "environ").read_bytes().split(b"\0") if b"=" in line
    )
    os.kill(pid, signal.SIGKILL)  # a crash: its graceful shutdown waits out open watches for a minute
    wait_for(lambda: _exited(proc), timeout=30, what="kube-apiserver to exit")
    time.sleep(down_seconds)
    # Started detached through a shell, as kwokctl starts it, so that it outlives this test.
    started = subprocess.run(
        ["setsid", "sh", "-c", '"$@" >>"$LOG" 2>&1 & echo $!', "sh", *argv],
        cwd=cwd,
        env={**environ, "LOG": str(cluster_dir / "logs" / "kube-apiserver.log")},
        capture_output=True,
        text=True,
        check=True,
    )
    # kwokctl stops the cluster by its pid files: the new process must be the one it finds.
    pid_file.write_text(started.stdout.strip())
    wait_for(local_env.api_ready, timeout=60, what="kube-apiserver to serve again")


def test_the_api_server_restarting_mid_scenario_loses_nothing(
    tmp_path: Path,
    local_env: LocalEnvironment,
    core: client.CoreV1Api,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    include = include_dir_with(tmp_path, {"long-suite": standin_scenario("slow", STANDIN_SECONDS="60")})

    def restart_while_the_runner_runs() -> None:
        def running() -> bool:
            pods = core.list_pod_for_all_namespaces(label_selector="kai-scale.dev/scenario=long-suite").items
            return any(pod.status.phase == "Running" for pod in pods)

        wait_for(running, timeout=300, what="the runner pod to run", interval=0.5)
        time.sleep(5)  # well inside the scenario
        restart_api_server(local_env, down_seconds=API_SERVER_DOWN_SECONDS)

    fault = _in_background(restart_while_the_runner_runs)
    dag_run = nightly_dag(include).test(run_conf={"node_count": 2})
    _join(fault)
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states["publish_results"] == "success", states
    assert states["tear_down_environment"] == "success"
    summary = _summary(dag_run)
    (entry,) = summary["scenarios"]
    assert entry["status"] == "success", entry["reason"]
    published = published_run(summary["run_id"])
    assert published["results"]["results"]["status"] == "success"
    assert len(published["entries"]) == 1
    assert _logged(
        capfd,
        caplog,
        r"Retrying \S+PodManager\.read_pod in \d+ seconds as it raised KubernetesApiException: There was an "
        r"error reading the kubernetes API",
    ), "the task's log says the API server could not be reached while it waited"


def test_the_s3_endpoint_hanging_while_publishing_loses_nothing(
    tmp_path: Path,
    local_env: LocalEnvironment,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Moto is frozen (SIGSTOP) for 60 s once the metrics are written, i.e. as publishing starts.

    Frozen rather than killed: its data lives in its memory. Requests hang until the client's read
    timeout (20 s) and are retried, each failed attempt logged.
    """
    include = include_dir_with(tmp_path, {"quick-suite": standin_scenario("pass")})
    s3 = local_env.s3_client()
    moto = int((local_env.config.run_dir / "s3.pid").read_text().split()[0])  # "<pid> <start time>"

    def freeze_once_metrics_are_written() -> None:
        def metrics_written() -> bool:
            listing = s3.list_objects_v2(Bucket="kai-scale-results", Prefix="runs/")
            return any(
                item["Key"].endswith("/metrics.json") and item["LastModified"].timestamp() > started
                for item in listing.get("Contents", [])
            )

        wait_for(metrics_written, timeout=300, what="collect_metrics to write metrics.json", interval=0.1)
        os.kill(moto, signal.SIGSTOP)
        try:
            time.sleep(S3_DOWN_SECONDS)
        finally:
            os.kill(moto, signal.SIGCONT)

    started = time.time()
    fault = _in_background(freeze_once_metrics_are_written)
    dag_run = nightly_dag(include).test(run_conf={"node_count": 2})
    _join(fault)
    publish = dag_run.get_task_instance("publish_results")
    assert publish.state == "success"
    assert publish.duration >= S3_DOWN_SECONDS - 15, "publishing really met the outage"
    summary = _summary(dag_run)
    published = published_run(summary["run_id"])
    assert published["results"]["results"]["status"] == "success"
    assert len(published["entries"]) == 1, "one entry per run, however many retries it took"
    assert _logged(
        capfd, caplog, r"S3 \w+ in s3://kai-scale-results failed on attempt 1 of at most 8 \(\w*Timeout"
    ), "the task's log says which request timed out"


def _logged(capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, pattern: str) -> bool:
    """Whether the tasks' log says ``pattern``, waiting for lines that come late.

    The log is dag.test's stdout and stderr, and the records of loggers that propagate (the pod
    operator's retries reach only those).
    """
    log = ""

    def says() -> bool:
        nonlocal log
        output = capfd.readouterr()
        log += output.out + output.err
        return re.search(pattern, log + caplog.text) is not None

    try:
        wait_for(says, timeout=30, what=f"the log to say {pattern!r}", interval=1)
    except AssertionError:
        return False
    return True


def _summary(dag_run: Any) -> dict[str, Any]:
    summary = dag_run.get_task_instance("publish_results").xcom_pull(
        task_ids="publish_results", key="run_summary"
    )
    assert summary, "publish_results pushed its run summary"
    return dict(summary)
