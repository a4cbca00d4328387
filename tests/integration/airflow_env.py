"""Pointing Airflow at the local environment, and building test variants of the nightly DAG."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import yaml

from kai_scale.dag_factory import build_nightly_dag
from kai_scale.object_keys import manifest_key, published_keys
from kai_scale.scenario_files import load_scenarios
from kai_scale.settings import DEFAULT_RUNNER_IMAGE, PipelineSettings
from localenv import settings as localenv_settings
from localenv.airflow import TASK_LOGS_PREFIX
from localenv.environment import LocalEnvironment
from tests.conftest import REPO

STANDIN_SUITE = REPO / "tests" / "standin" / "kai_suite_standin.py"
# The tests' runner image: the runner image that localenv builds from docker/runner/Dockerfile, plus
# the stand-in suite, which the runner pods of standin_scenario() run in place of KAI's.
TEST_RUNNER_IMAGE = "ghcr.io/kai-scale-pipeline/runner-with-standin"
STANDIN_IN_IMAGE = "/usr/local/bin/kai-suite-standin"
DAG_ID = "kai_scale_nightly"  # dag.test() needs a DAG of this id in the DAGs folder


def migrate_airflow_db() -> None:
    """Migrate the tests' Airflow metadata database (AIRFLOW__DATABASE__SQL_ALCHEMY_CONN)."""
    subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
        check=True,
        capture_output=True,
        timeout=300,
    )


def include_dir_with(tmp_path: Path, scenarios: dict[str, dict[str, Any]]) -> Path:
    """An include/ directory with the shipped manifests and metrics profile, and the given scenarios."""
    include = tmp_path / "include"
    shutil.copytree(REPO / "include" / "manifests", include / "manifests")
    shutil.copytree(REPO / "include" / "metrics", include / "metrics")
    (include / "scenarios").mkdir()
    for name, body in scenarios.items():
        (include / "scenarios" / f"{name}.yaml").write_text(yaml.safe_dump({"name": name, **body}))
    return include


def push_test_runner_image(local_env: LocalEnvironment) -> None:
    """Push TEST_RUNNER_IMAGE (tag ``main``, the pipeline's default) to the local registry."""
    local_env.registry().push_with_file(
        base=f"{DEFAULT_RUNNER_IMAGE}:main",
        reference=f"{TEST_RUNNER_IMAGE}:main",
        file=STANDIN_SUITE,
        path_in_image=STANDIN_IN_IMAGE,
    )


def standin_scenario(mode: str, *, timeout: str = "5m", **env: str) -> dict[str, Any]:
    """A ginkgo scenario whose runner pod runs the stand-in suite (tests/standin/kai_suite_standin.py)."""
    return {
        "description": f"stand-in suite, mode {mode}",
        "run": {"kind": "ginkgo", "focus": "Big cluster Sanity Fill Cluster"},
        "timeout": timeout,
        "env": {"KAI_SCALE_SUITE_BINARY": STANDIN_IN_IMAGE, "STANDIN_MODE": mode, **env},
        "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}},
    }


def workload_scenario(pods_per_node: int = 1) -> dict[str, Any]:
    """A small GPU workload scenario."""
    return {
        "description": "small GPU workload",
        "run": {"kind": "workload", "pods_per_node": pods_per_node},
        "timeout": "5m",
        "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}},
    }


def nightly_dag(include: Path) -> Any:
    """The nightly DAG built on ``include`` (its scenarios), as the DAG file builds it."""
    # Short retry delays: the unreachable-cluster case retries its setup and teardown.
    settings = dataclasses.replace(
        PipelineSettings.from_environment(default_include_dir=include),
        include_dir=include,
        retry_delay_seconds=1,
    )
    return build_nightly_dag(
        dag_id=DAG_ID,
        scenarios=load_scenarios(include / "scenarios"),
        doc_md="test variant",
        settings=settings,
    )


def read_json(key: str) -> Any:
    """A JSON object of the local bucket."""
    s3 = boto3.client("s3")  # endpoint and credentials from the AWS_* variables of the local environment
    return json.loads(s3.get_object(Bucket=localenv_settings.DEFAULT_BUCKET, Key=key)["Body"].read())


def published_run(run_id: str) -> dict[str, Any]:
    """A run as published under Public/ of the local bucket.

    Its three objects, its manifest entries and the manifest's whole history.
    """
    keys = published_keys(prefix="Public/", run_id=run_id)
    manifest = read_json(manifest_key("Public/"))
    return {
        "results": read_json(keys.results),
        "report": read_json(keys.ginkgo_report),
        "metrics": read_json(keys.metrics),
        "entries": [run for run in manifest["runs"] if run.get("run_id") == run_id],
        "manifest_runs": manifest["runs"],
        "results_key": keys.results,
    }


def task_logs(run_id: str) -> dict[str, str]:
    """The deployed Airflow's task logs of the run ``run_id`` (remote logging to the bucket), by key."""
    s3 = boto3.client("s3")  # endpoint and credentials from the AWS_* variables of the local environment
    bucket = localenv_settings.DEFAULT_BUCKET
    logs = {}
    prefix = f"{TASK_LOGS_PREFIX}dag_id={DAG_ID}/run_id={run_id}/"
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            logs[item["Key"]] = body.decode(errors="replace")
    return logs


def logged_task_ids(logs: dict[str, str]) -> set[str]:
    """The task ids of task logs keyed as ``task_logs`` keys them (``…/task_id=<id>/attempt=<n>.log``)."""
    return {key.split("task_id=")[1].split("/")[0] for key in logs}
