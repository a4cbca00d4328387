"""Helm's command lines for installing charts at pinned versions, and what its answers mean; pure.

``HelmHook`` (``hooks/helm.py``) runs them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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
    plain_http: bool = False
    """The chart's OCI registry speaks plain HTTP (a mirror: see kai_scale.cluster.sources)."""
    post_renderer: tuple[str, ...] = ()
    """helm's ``--post-renderer``: a command and its arguments (kai_scale.cluster.placement)."""

    @property
    def name(self) -> str:
        """The chart's own name: the last part of its reference."""
        return self.chart.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True, kw_only=True)
class HelmTarget:
    """Which cluster helm talks to: the Airflow connection's kubeconfig and context."""

    kubeconfig: str | None
    """A kubeconfig file (None: helm's default, in-cluster or ``KUBECONFIG``)."""
    context: str | None = None
    """The kubeconfig context to use (the connection's ``cluster_context``); None: its current one."""

    def args(self) -> list[str]:
        """Helm's flags for this target."""
        return [
            *(["--kubeconfig", self.kubeconfig] if self.kubeconfig else []),
            *(["--kube-context", self.context] if self.context else []),
        ]


def upgrade_install_argv(*, chart: Chart, target: HelmTarget) -> list[str]:
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
    if chart.plain_http:
        argv.append("--plain-http")
    if chart.post_renderer:
        argv += ["--post-renderer", chart.post_renderer[0]]
        for argument in chart.post_renderer[1:]:
            argv += ["--post-renderer-args", argument]
    for key, value in sorted((chart.values or {}).items()):
        argv += ["--set", f"{key}={value}"]
    return argv + target.args()


def list_argv(*, chart: Chart, target: HelmTarget) -> list[str]:
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
        *target.args(),
    ]


def get_values_argv(*, chart: Chart, target: HelmTarget) -> list[str]:
    """``helm get values`` of the chart's release (the user-supplied ones), as JSON."""
    return [
        "helm",
        "get",
        "values",
        chart.release,
        "--namespace",
        chart.namespace,
        "--output",
        "json",
        *target.args(),
    ]


def is_deployed(list_output: str, *, chart: Chart) -> bool:
    """Whether ``helm list`` output shows the release deployed from the chart at its pinned version."""
    releases = json.loads(list_output or "[]")
    wanted = f"{chart.name}-{chart.version}"
    return any(
        r.get("name") == chart.release and r.get("chart") == wanted and r.get("status") == "deployed"
        for r in releases
    )


def _flattened(values: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    r"""``{"a": {"b": 1}}`` as ``{"a.b": "1"}``: the ``--set`` form, values as helm parses them back.

    A key with a dot of its own (``extraArgs: {log.level: info}``) is written escaped, as ``--set``
    takes it: ``extraArgs.log\.level``.
    """
    flat: dict[str, str] = {}
    for key, value in values.items():
        escaped = key.replace(".", "\\.")
        if isinstance(value, Mapping):
            flat.update(_flattened(value, f"{prefix}{escaped}."))
        else:
            flat[f"{prefix}{escaped}"] = value if isinstance(value, str) else json.dumps(value)
    return flat


def values_match(get_values_output: str, *, chart: Chart) -> bool:
    """Whether the release's user-supplied values are exactly the chart's ``--set`` values."""
    return _flattened(json.loads(get_values_output or "null") or {}) == dict(chart.values or {})
