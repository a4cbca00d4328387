"""Helm on the worker, against the cluster of a ``kubernetes`` connection: the one place helm runs.

What helm is asked (its command lines) and what its answers mean are pure, in ``helm_commands``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from typing import Any

from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
from airflow.sdk.bases.hook import BaseHook

from kai_scale.hooks.helm_commands import (
    Chart,
    HelmTarget,
    get_values_argv,
    is_deployed,
    list_argv,
    upgrade_install_argv,
    values_match,
)

# helm waits for the release's resources itself (--wait); this bounds the whole command.
HELM_TIMEOUT_SECONDS = 900


class HelmError(RuntimeError):
    """A helm command failed; the message holds its output."""


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


class HelmHook(BaseHook):
    """Installs charts with helm on the cluster of a ``kubernetes`` connection (its kubeconfig and context).

    :param conn_id: Airflow connection of the cluster, as ``ClusterHook``'s.
    """

    hook_name = "KAI scale helm"

    def __init__(self, *, conn_id: str) -> None:
        super().__init__()
        self.conn_id = conn_id

    @cached_property
    def conn_extras(self) -> dict[str, Any]:
        """The connection's extra fields, read as ``KubernetesHook`` reads them (no client is made)."""
        return dict(KubernetesHook(conn_id=self.conn_id).conn_extras)

    @contextmanager
    def cli_kubeconfig(self) -> Iterator[str | None]:
        """A kubeconfig path for command-line tools (helm) that reaches this connection's cluster.

        The connection's ``kube_config_path``, or its inline ``kube_config`` written to a private file
        for the duration; None (the tool's own default: in-cluster or ``KUBECONFIG``) when it has
        neither, as the connection's client does then.
        """
        extra = self.conn_extras
        if extra.get("kube_config_path"):
            yield str(extra["kube_config_path"])
            return
        inline = extra.get("kube_config")
        if not inline:
            yield None
            return
        text = inline if isinstance(inline, str) else json.dumps(inline)
        # mkstemp creates the file readable by its owner only: it holds credentials.
        handle, path = tempfile.mkstemp(prefix="kai-scale-kubeconfig-")
        try:
            with os.fdopen(handle, "w") as file:
                file.write(text)
            yield path
        finally:
            os.unlink(path)

    @contextmanager
    def target(self) -> Iterator[HelmTarget]:
        """Where helm reaches this connection's cluster: its kubeconfig and its ``cluster_context``."""
        context = self.conn_extras.get("cluster_context") or None
        with self.cli_kubeconfig() as kubeconfig:
            yield HelmTarget(kubeconfig=kubeconfig, context=context)

    def ensure_release(self, chart: Chart) -> bool:
        """Install or upgrade the release unless it is deployed at the pinned version with the same values.

        Checked first so that a re-run setup (a retried scenario) costs a ``helm list`` and a ``helm get
        values``, not a ``--wait``. True when helm changed the release.
        """
        with self.target() as target:
            if is_deployed(run(list_argv(chart=chart, target=target)), chart=chart) and values_match(
                run(get_values_argv(chart=chart, target=target)), chart=chart
            ):
                return False
            run(upgrade_install_argv(chart=chart, target=target))
        return True
