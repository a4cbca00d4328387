"""The kubeconfig the runner gives KAI's suite, which reads no in-cluster account of its own."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kai_scale_model.scenario import GinkgoRun, Scenario
from kai_scale_runner.ginkgo import SERVICE_ACCOUNT_DIR, in_cluster_kubeconfig, run_suite

# Stands in for the compiled suite: records the KUBECONFIG it was given and the file's content.
RECORDING_SUITE = """#!/bin/sh
printf '%s\\n' "${KUBECONFIG:-unset}" > seen-kubeconfig
[ -n "$KUBECONFIG" ] && cp "$KUBECONFIG" seen-kubeconfig.json
exit 1
"""


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    suite = tmp_path / "suite.test"
    suite.write_text(RECORDING_SUITE)
    suite.chmod(0o755)
    monkeypatch.setenv("KAI_SCALE_SUITE_BINARY", str(suite))
    scenario = Scenario.model_validate(
        {
            "name": "sanity-fill-cluster",
            "description": "a suite scenario",
            "run": {"kind": "ginkgo", "focus": "Sanity Fill Cluster"},
            "timeout": "10m",
        }
    )
    assert isinstance(scenario.run, GinkgoRun)
    workdir = tmp_path / "work"
    workdir.mkdir()
    run_suite(scenario=scenario, run=scenario.run, node_count=20, workdir=workdir)
    return workdir


def test_in_a_pod_the_suite_gets_a_kubeconfig_of_the_pods_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    workdir = _run(tmp_path, monkeypatch)
    assert (workdir / "seen-kubeconfig").read_text().strip() == str(workdir / "kubeconfig")
    config = json.loads((workdir / "seen-kubeconfig.json").read_text())
    assert config["clusters"][0]["cluster"] == {
        "server": "https://10.0.0.1:443",
        "certificate-authority": str(SERVICE_ACCOUNT_DIR / "ca.crt"),
    }
    assert config["users"][0]["user"] == {"tokenFile": str(SERVICE_ACCOUNT_DIR / "token")}, (
        "rotated, not copied"
    )
    assert "KUBECONFIG" not in os.environ, "only the suite's environment"


def test_a_runner_given_a_kubeconfig_passes_it_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given = tmp_path / "given-kubeconfig"
    given.write_text("{}")
    monkeypatch.setenv("KUBECONFIG", str(given))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    workdir = _run(tmp_path, monkeypatch)
    assert (workdir / "seen-kubeconfig").read_text().strip() == str(given)
    assert not (workdir / "kubeconfig").exists()


def test_an_ipv6_service_address_is_bracketed() -> None:
    config = in_cluster_kubeconfig(host="fd00::1", port="443", service_account_dir=SERVICE_ACCOUNT_DIR)
    assert config["clusters"][0]["cluster"]["server"] == "https://[fd00::1]:443"
