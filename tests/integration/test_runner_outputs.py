"""The runner's uploads to presigned URLs of the local S3 endpoint, with the stand-in suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kubernetes import client

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale_model import labels
from kai_scale_model.runner_interface import GINKGO_REPORT, OUTCOME, SUITE_RESULTS, output_file
from kai_scale_model.scenario import Scenario
from localenv import settings as localenv_settings
from tests.integration.airflow_env import STANDIN_SUITE
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("kai", "airflow_on_local_env")

SCENARIO = Scenario.model_validate(
    {
        "name": "standin",
        "description": "stand-in suite, one passing spec",
        "timeout": "5m",
        "run": {"kind": "ginkgo", "focus": "Big cluster Sanity Fill Cluster"},
    }
)


def _run_runner(*, workdir: Path, urls: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The runner command as a pod runs it: its inputs in its environment (the pod's env vars)."""
    env = {
        **os.environ,  # KUBECONFIG and the local S3 endpoint, from the local environment's exports
        "KAI_SCALE_SCENARIO": SCENARIO.model_dump_json(),
        "NODE_COUNT": "10",
        "KAI_SCALE_RUN_ID": "test-run",
        "KAI_SCALE_OUTPUT_URLS": json.dumps(urls),
        "KAI_SCALE_SUITE_BINARY": str(STANDIN_SUITE),
        "STANDIN_MODE": "pass",
    }
    runner = str(Path(sys.executable).parent / "kai-scale-runner")
    return subprocess.run(
        [runner, "run", "--workdir", str(workdir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_report_that_cannot_be_uploaded_leaves_no_result_claiming_it(tmp_path: Path) -> None:
    """outcome.json goes up last: when the report's upload fails, the result is not uploaded either."""
    store = ResultsBucketHook(aws_conn_id="aws_default", bucket=localenv_settings.DEFAULT_BUCKET)
    prefix = f"test-{uuid.uuid4().hex[:8]}/"
    keys = {name: f"{prefix}{output_file(name)}" for name in (OUTCOME, GINKGO_REPORT, SUITE_RESULTS)}
    urls = {name: store.presign_put(key=key, expires_seconds=600) for name, key in keys.items()}
    missing_bucket = ResultsBucketHook(aws_conn_id="aws_default", bucket="no-such-bucket")
    broken_report_url = missing_bucket.presign_put(key=keys[GINKGO_REPORT], expires_seconds=600)

    failed = _run_runner(workdir=tmp_path / "first", urls={**urls, GINKGO_REPORT: broken_report_url})

    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "outputs not uploaded: uploading ginkgo-report.json failed: HTTP 404" in failed.stdout
    assert not store.exists(keys[OUTCOME])
    # The same result URL works once the report's does: it was the order, not the URL.
    passed = _run_runner(workdir=tmp_path / "second", urls=urls)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert store.exists(keys[OUTCOME])
    assert store.exists(keys[GINKGO_REPORT])
    written = (tmp_path / "second" / output_file(SUITE_RESULTS)).read_bytes()
    assert store.read_bytes(keys[SUITE_RESULTS]) == written, "the suite's own file, as it wrote it"


def test_a_workload_uploads_its_outcome_before_it_removes_its_pods(
    tmp_path: Path, namespace: str, core: client.CoreV1Api
) -> None:
    """Removing the workload's pods can take minutes: the measurement is uploaded before it starts.

    A finalizer the test puts on the workload's pods holds their removal; the outcome must be in the
    bucket while the runner is still waiting for them to go.
    """
    scenario = Scenario.model_validate(
        {
            "name": "held-workload",
            "description": "pods no scheduler serves; their removal held by a finalizer",
            # The binding watch ends 30 s in (the timeout less 120 s, at least 30 s).
            "timeout": "150s",
            "run": {"kind": "workload", "pods_per_node": 2, "scheduler_name": "none"},
        }
    )
    store = ResultsBucketHook(aws_conn_id="aws_default", bucket=localenv_settings.DEFAULT_BUCKET)
    key = f"test-{uuid.uuid4().hex[:8]}/{output_file(OUTCOME)}"
    env = {
        **os.environ,
        "KAI_SCALE_SCENARIO": scenario.model_dump_json(),
        "NODE_COUNT": "1",
        "KAI_SCALE_RUN_ID": "held-run",
        "KAI_SCALE_OUTPUT_URLS": json.dumps({OUTCOME: store.presign_put(key=key, expires_seconds=600)}),
        "POD_NAMESPACE": namespace,
    }
    runner = subprocess.Popen(
        [str(Path(sys.executable).parent / "kai-scale-runner"), "run", "--workdir", str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    selector = f"{labels.ROLE}={labels.WORKLOAD}"
    try:
        wait_for(
            lambda: len(core.list_namespaced_pod(namespace, label_selector=selector).items) == 2,
            timeout=60,
            what="the workload's two pods",
        )
        for pod in core.list_namespaced_pod(namespace, label_selector=selector).items:
            core.patch_namespaced_pod(pod.metadata.name, namespace, {"metadata": {"finalizers": [HOLD]}})
        wait_for(lambda: store.exists(key), timeout=90, what="the outcome in the bucket")
        assert runner.poll() is None, "the runner still waits for its pods: the upload came first"
    finally:
        for pod in core.list_namespaced_pod(namespace, label_selector=selector).items:
            core.patch_namespaced_pod(pod.metadata.name, namespace, {"metadata": {"finalizers": None}})
    output, _ = runner.communicate(timeout=120)
    assert "workload pods removed" in output
    outcome = json.loads(store.read_text(key) or "{}")
    assert outcome["tests"][0]["details"]["scheduled pods"] == 0


HOLD = "kai-scale.dev/test-hold"
