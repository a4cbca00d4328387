"""Helm on the worker: installing charts at pinned versions."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


class HelmError(RuntimeError):
    """A helm command failed; the message holds its output."""


@dataclass(frozen=True, kw_only=True)
class Chart:
    """A chart release as include/manifests/installs.yaml declares it."""

    release: str
    """Release name."""
    chart: str
    """Chart reference (``oci://...`` or a name in ``repo``)."""
    version: str
    """Pinned chart version."""
    namespace: str
    """Namespace of the release."""
    repo: str | None = None
    """Chart repository URL, when the chart is not an OCI reference."""
    values: Mapping[str, str] | None = None
    """``--set`` values."""


def upgrade_install_argv(*, chart: Chart, kubeconfig: str | None) -> list[str]:
    """``helm upgrade --install`` for the chart at its pinned version; idempotent by design."""
    argv = [
        "helm",
        "upgrade",
        "--install",
        chart.release,
        chart.chart,
        "--version",
        chart.version,
        "--namespace",
        chart.namespace,
        "--create-namespace",
        "--wait",
        "--timeout",
        "10m",
    ]
    if chart.repo:
        argv += ["--repo", chart.repo]
    if chart.version.startswith("0.0."):
        argv.append("--devel")  # fake-gpu-operator publishes pre-release-style versions
    for key, value in sorted((chart.values or {}).items()):
        argv += ["--set", f"{key}={value}"]
    if kubeconfig:
        argv += ["--kubeconfig", kubeconfig]
    return argv


def helm_available() -> bool:
    """Whether the worker has helm on its PATH."""
    return shutil.which("helm") is not None


def run(argv: Sequence[str]) -> str:
    """Run helm; raise HelmError with its output on failure."""
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=900)
    if result.returncode != 0:
        raise HelmError(f"{' '.join(argv[:4])} failed (exit {result.returncode}): {result.stderr.strip()}")
    return result.stdout
