"""What the integration tests share: the local environment's Airflow settings, its bucket, the stand-ins."""

from __future__ import annotations

import json
from typing import Any

import boto3

from kai_scale.object_keys import manifest_key, published_keys
from localenv import settings as localenv_settings
from localenv.airflow import TASK_LOGS_PREFIX
from localenv.demo import DAG_ID
from tests.conftest import REPO

STANDIN_SUITE = REPO / "tests" / "standin" / "kai_suite_standin.py"
# Where the stand-in suite is in the runner image of the deployment's stand-in nights (their runner
# tag): the runner pods of standin_scenario() run it in place of KAI's.
STANDIN_IN_IMAGE = "/usr/local/bin/kai-suite-standin"


def standin_scenario(mode: str, *, timeout: str = "5m", **env: str) -> dict[str, Any]:
    """A ginkgo scenario whose runner pod runs the stand-in suite (tests/standin/kai_suite_standin.py)."""
    return {
        "description": f"stand-in suite, mode {mode}",
        "run": {"kind": "ginkgo", "focus": "Big cluster Sanity Fill Cluster"},
        "timeout": timeout,
        "env": {"KAI_SCALE_SUITE_BINARY": STANDIN_IN_IMAGE, "STANDIN_MODE": mode, **env},
        "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}},
    }


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
