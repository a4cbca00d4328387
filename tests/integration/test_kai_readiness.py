"""The runner's readiness check on the local cluster: an installed KAI whose scheduler is off is not ready."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale_model.runner_interface import NOT_RUN_EXIT_CODE, OUTCOME, output_file
from kai_scale_model.scenario import Scenario
from kai_scale_runner.ginkgo import SUITE_RESULTS_FILE
from kai_scale_runner.kai_detection import READY_TIMEOUT_SECONDS
from localenv import settings as localenv_settings
from tests.integration.airflow_env import STANDIN_SUITE

pytestmark = pytest.mark.usefixtures("kai_scheduler_off", "airflow_on_local_env")


def test_a_suite_scenario_without_kais_scheduler_serving_does_not_run(tmp_path: Path) -> None:
    """KAI is installed, its scheduler switched off: after waiting for a pod of it, the scenario is not run.

    The stand-in suite would pass: that it never ran is the runner's doing. Takes the runner's wait
    (READY_TIMEOUT_SECONDS).
    """
    scenario = Scenario.model_validate(
        {
            "name": "standin",
            "description": "stand-in suite, one passing spec",
            "timeout": "5m",
            "run": {"kind": "ginkgo", "focus": "Big cluster Sanity Fill Cluster"},
        }
    )
    store = ResultsBucketHook(aws_conn_id="aws_default", bucket=localenv_settings.DEFAULT_BUCKET)
    key = f"test-{uuid.uuid4().hex[:8]}/{output_file(OUTCOME)}"
    env = {
        **os.environ,  # KUBECONFIG and the local S3 endpoint, from the local environment's exports
        "KAI_SCALE_SCENARIO": scenario.model_dump_json(),
        "NODE_COUNT": "10",
        "KAI_SCALE_OUTPUT_URLS": json.dumps({OUTCOME: store.presign_put(key=key, expires_seconds=600)}),
        "KAI_SCALE_SUITE_BINARY": str(STANDIN_SUITE),
        "STANDIN_MODE": "pass",
    }
    ran = subprocess.run(
        [str(Path(sys.executable).parent / "kai-scale-runner"), "run", "--workdir", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=READY_TIMEOUT_SECONDS + 60,
        check=False,
    )

    assert ran.returncode == NOT_RUN_EXIT_CODE, ran.stdout + ran.stderr
    outcome = json.loads(store.read_text(key) or "{}")
    assert (outcome["status"], outcome["exit_code"], outcome["tests"]) == ("not_run", None, [])
    assert outcome["reason"] == (
        "KAI not ready: its scheduler is not serving (no running, ready pod app=kai-scheduler-default "
        "in namespace kai-scheduler; pods: none)"
    )
    assert not (tmp_path / SUITE_RESULTS_FILE).exists(), "the suite never started"
