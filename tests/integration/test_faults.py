"""Faults a nightly run meets on a real cluster, staged on the local environment.

The test breaks one real component while the shipped pipeline runs (the S3 endpoint hanging) and
checks that nothing is lost: the outputs complete, the manifest holds one entry for the run, and the
log says what happened. The table of outcomes is in docs/reliability.md; the API server restarting
mid-scenario is staged on the chart-deployed Airflow (airflow_deployment/test_standin_night.py).
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from localenv.environment import LocalEnvironment
from tests.integration.airflow_env import include_dir_with, nightly_dag, published_run, standin_scenario
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("kai", "airflow_on_local_env")

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
