"""Every benchmark script runs to the end with tiny inputs, so none of them rots unnoticed.

The figures are not checked (they belong in docs/benchmarks.md); each script must finish, print its
table and leave nothing behind in the local environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from localenv.environment import LocalEnvironment
from tests.conftest import REPO

BENCHMARKS = REPO / "benchmarks"


def _run(script: str, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, f"{script} failed:\n{result.stdout}\n{result.stderr[-4000:]}"
    assert "|---|" in result.stdout, f"{script} printed no table:\n{result.stdout}"
    return result.stdout


def _objects(s3: Any, bucket: str) -> dict[str, str]:
    """Every object of the bucket and its ETag."""
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {item["Key"]: item["ETag"] for page in pages for item in page.get("Contents", [])}


def test_every_benchmark_script_has_a_smoke_test() -> None:
    smoked = {
        "dag_parse.py",
        "publish.py",
        "load_generator.py",
        # on the night of airflow_deployment/test_release.py, which it reads (--run-id)
        "pipeline_overhead.py",
        # on the same night (--read local=<run id>): its own nights take an hour
        "profiling_cost.py",
        "local_env.py",
        "change_points.py",
        "trend_view.py",
    }
    assert {path.name for path in BENCHMARKS.glob("*.py")} == smoked


def test_change_points() -> None:
    output = _run("change_points.py", "--trials", "2")
    assert "false flags" in output


def test_dag_parse() -> None:
    output = _run("dag_parse.py", "--repeat", "1", "--scenario-counts", "6")
    assert "kai_scale_nightly, 6 scenarios" in output


def test_publish_uses_a_bucket_of_its_own_and_removes_it(local_env: LocalEnvironment) -> None:
    output = _run("publish.py", "--history", "20", "--repeat", "1", "--report-mb", "1")
    assert "manifest now holds" in output
    buckets = [bucket["Name"] for bucket in local_env.s3().client().list_buckets()["Buckets"]]
    assert not [name for name in buckets if name.startswith("kai-scale-bench-")]


def test_trend_view_uses_a_bucket_of_its_own_and_removes_it(local_env: LocalEnvironment) -> None:
    output = _run("trend_view.py", "--history", "60", "--repeat", "1")
    assert "| Runs page, first request" in output
    buckets = [bucket["Name"] for bucket in local_env.s3().client().list_buckets()["Buckets"]]
    assert not [name for name in buckets if name.startswith("kai-scale-bench-")]


@pytest.mark.usefixtures("prepared_cluster")
def test_load_generator(local_env: LocalEnvironment) -> None:
    try:
        output = _run("load_generator.py", "--nodes", "2", "--pods-per-node", "1", "--timeout", "150")
    finally:
        # As prepared_cluster left it: no pool.
        local_env.kubectl("delete", "nodepool", "managed-nodepool", "--ignore-not-found", "--wait=true")
    assert "pods (2 nodes)" in output


@pytest.mark.restarts_local_env
def test_local_env_on_the_session_environment_makes_its_pool_ready(local_env: LocalEnvironment) -> None:
    """With the real node: KWOK and kwok-operator installed by the pipeline's own steps, nodes Ready.

    The benchmark restarts the session's environment (its warm start), so this runs with the others
    that restart it, last; the environment is up again after it.
    """
    output = _run("local_env.py", "--nodes", "1")
    assert "| runner pod from creation to Running on kai-system (pull Always), 5 pods | median" in output
    assert "| 1 nodes Ready after the NodePool is applied |" in output
    assert "| RSS at 1 nodes: total |" in output
    assert local_env.is_up()
