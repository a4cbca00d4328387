"""Helm on the worker: installing charts at pinned versions."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# helm waits for the release's resources itself (--wait); this bounds the whole command.
HELM_TIMEOUT_SECONDS = 900


class HelmError(RuntimeError):
    """A helm command failed; the message holds its output."""


@dataclass(frozen=True, kw_only=True)
class Chart:
    """A chart release as include/manifests/installs.yaml declares it."""

    release: str
    """Release name."""
    chart: str
    """Chart reference (``oci://...``, a name in ``repo``, or a local path)."""
    version: str
    """Pinned chart version."""
    namespace: str
    """Namespace of the release."""
    repo: str | None = None
    """Chart repository URL, when the chart is not an OCI reference."""
    values: Mapping[str, str] | None = None
    """``--set`` values."""

    @property
    def name(self) -> str:
        """The chart's own name: the last part of its reference."""
        return self.chart.rstrip("/").rsplit("/", 1)[-1]


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
    for key, value in sorted((chart.values or {}).items()):
        argv += ["--set", f"{key}={value}"]
    return argv + _kubeconfig_args(kubeconfig)


def list_argv(*, chart: Chart, kubeconfig: str | None) -> list[str]:
    """``helm list`` of the chart's release, as JSON."""
    return [
        "helm",
        "list",
        "--namespace",
        chart.namespace,
        "--filter",
        f"^{chart.release}$",
        "--output",
        "json",
        *_kubeconfig_args(kubeconfig),
    ]


def is_deployed(list_output: str, *, chart: Chart) -> bool:
    """Whether ``helm list`` output shows the release deployed from the chart at its pinned version."""
    releases = json.loads(list_output or "[]")
    wanted = f"{chart.name}-{chart.version}"
    return any(
        r.get("name") == chart.release and r.get("chart") == wanted and r.get("status") == "deployed"
        for r in releases
    )


def _kubeconfig_args(kubeconfig: str | None) -> list[str]:
    return ["--kubeconfig", kubeconfig] if kubeconfig else []


def helm_available() -> bool:
    """Whether the worker has helm on its PATH."""
    return shutil.which("helm") is not None


def run(argv: Sequence[str]) -> str:
    """Run helm; raise HelmError with its output on failure."""
    try:
        result = subprocess.run(
            list(argv), capture_output=True, text=True, check=False, timeout=HELM_TIMEOUT_SECONDS
        )
    except subprocess.TimeoutExpired as error:
        raise HelmError(f"{' '.join(argv[:4])} did not finish in {HELM_TIMEOUT_SECONDS} s") from error
    except OSError as error:
        raise HelmError(f"cannot run helm: {error}; install helm on the worker") from error
    if result.returncode != 0:
        raise HelmError(f"{' '.join(argv[:4])} failed (exit {result.returncode}): {result.stderr.strip()}")
    return result.stdout


def ensure_release(chart: Chart, *, kubeconfig: str | None) -> bool:
    """Install or upgrade the release unless it is deployed at the pinned version; True when helm changed it.

    Checked first so that a re-run setup (a retried scenario) costs one ``helm list``, not a ``--wait``.
    """
    if is_deployed(run(list_argv(chart=chart, kubeconfig=kubeconfig)), chart=chart):
        return False
    run(upgrade_install_argv(chart=chart, kubeconfig=kubeconfig))
    return True
