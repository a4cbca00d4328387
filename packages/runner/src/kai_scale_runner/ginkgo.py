"""Running a ``ginkgo`` scenario: the compiled KAI scale suite with a focus and a JSON report."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

from kai_scale_model.runner_interface import GINKGO_REPORT, NODE_COUNT_ENV, SUITE_RESULTS, output_file
from kai_scale_model.scenario import GinkgoRun, Scenario
from kai_scale_runner.ginkgo_results import SuiteVerdict, verdict

log = logging.getLogger(__name__)

# The suite writes it under this name in its working directory: the output is that file itself.
SUITE_RESULTS_FILE = output_file(SUITE_RESULTS)
REPORT_FILE = output_file(GINKGO_REPORT)
# Where the runner image puts the suite compiled with `go test -c ./test/e2e/scale` (see runner/Dockerfile).
DEFAULT_SUITE_BINARY = "/usr/local/bin/kai-scale-suite.test"
# At most this much of a scenario's timeout is kept back for writing and uploading its outputs.
SUITE_TIMEOUT_MARGIN_SECONDS = 120
# The pod's ServiceAccount, as Kubernetes mounts it.
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def suite_timeout_seconds(scenario: Scenario) -> int:
    """The suite's own timeout: inside the pod's deadline (the scenario's timeout), with a margin.

    Ginkgo then ends a hung spec itself and writes its report, and the runner still has time to
    upload it, before Kubernetes kills the pod at the deadline.
    """
    timeout = int(scenario.timeout.total_seconds())
    return max(timeout - min(SUITE_TIMEOUT_MARGIN_SECONDS, timeout // 10), 1)


def suite_argv(*, suite_binary: str, run: GinkgoRun, scenario: Scenario, workdir: Path) -> list[str]:
    """The suite's command line for this scenario."""
    argv = [
        suite_binary,
        f"--ginkgo.focus={run.focus}",
        f"--ginkgo.json-report={workdir / REPORT_FILE}",
        f"--ginkgo.timeout={suite_timeout_seconds(scenario)}s",
        "--ginkgo.v",
        "--ginkgo.no-color",
    ]
    if run.label_filter:
        argv.append(f"--ginkgo.label-filter={run.label_filter}")
    return argv


def in_cluster_kubeconfig(*, host: str, port: str, service_account_dir: Path) -> dict[str, Any]:
    """A kubeconfig (JSON is YAML) of the pod's own ServiceAccount: the suite reads only a kubeconfig file.

    (KAI's suite takes ``KUBECONFIG`` or ``~/.kube/config``, never the in-cluster account.) The token
    is named by its file, which the kubelet rotates, not copied.
    """
    server = f"https://{f'[{host}]' if ':' in host else host}:{port}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "in-cluster",
                "cluster": {"server": server, "certificate-authority": str(service_account_dir / "ca.crt")},
            }
        ],
        "users": [{"name": "runner", "user": {"tokenFile": str(service_account_dir / "token")}}],
        "contexts": [{"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "runner"}}],
        "current-context": "in-cluster",
    }


def _suite_kubeconfig(workdir: Path) -> dict[str, str]:
    """``KUBECONFIG`` for the suite: the runner's own when set, else one of the pod's account."""
    if os.environ.get("KUBECONFIG"):
        return {}
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        return {}  # neither: the suite says it has no kubeconfig, which names the cause
    path = workdir / "kubeconfig"
    path.write_text(
        json.dumps(in_cluster_kubeconfig(host=host, port=port, service_account_dir=SERVICE_ACCOUNT_DIR))
    )
    return {"KUBECONFIG": str(path)}


def _read(path: Path) -> str | None:
    return path.read_text(errors="replace") if path.exists() else None


def run_suite(
    *, scenario: Scenario, run: GinkgoRun, node_count: int, workdir: Path
) -> tuple[int, SuiteVerdict]:
    """Run the suite in ``workdir`` (its output goes to this process' stdout, the pod's log)."""
    suite_binary = os.environ.get("KAI_SCALE_SUITE_BINARY", DEFAULT_SUITE_BINARY)
    if not os.access(suite_binary, os.X_OK):
        reason = f"suite binary {suite_binary} not found or not executable: the runner image must contain it"
        return 127, SuiteVerdict(status="failure", reason=reason, tests=(), failure_kind="infrastructure")
    argv = suite_argv(suite_binary=suite_binary, run=run, scenario=scenario, workdir=workdir)
    log.info("running: %s", " ".join(argv))
    env = {**os.environ, **_suite_kubeconfig(workdir), **scenario.env, NODE_COUNT_ENV: str(node_count)}
    exit_code = subprocess.run(argv, cwd=workdir, env=env, check=False).returncode
    return exit_code, verdict(
        exit_code=exit_code,
        suite_json=_read(workdir / SUITE_RESULTS_FILE),
        report_json=_read(workdir / REPORT_FILE),
    )
