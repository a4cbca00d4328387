"""Release manifests downloaded from their publisher or a mirror: the one place the setup fetches over HTTP.

Which URL to fetch (upstream or its mirror) is decided by ``kai_scale.cluster.sources``, purely; this
hook only fetches it.
"""

from __future__ import annotations

import urllib.request
from typing import Any

import yaml
from airflow.sdk.bases.hook import BaseHook

DOWNLOAD_TIMEOUT_SECONDS = 60


class ReleaseManifestError(RuntimeError):
    """A release manifest cannot be downloaded: ``reference`` names it, ``reason`` says why."""

    def __init__(self, *, reference: str, reason: str) -> None:
        super().__init__(f"cannot download {reference}: {reason}")
        self.reference = reference
        self.reason = reason


class ReleaseManifestsHook(BaseHook):
    """Downloads release manifests, YAML over HTTP(S) or ``file://`` from the worker's disk; no connection."""

    hook_name = "KAI scale release manifests"

    def documents(self, reference: str) -> list[dict[str, Any]]:
        """The objects of the manifest at ``reference``; ReleaseManifestError when it cannot be read."""
        try:
            with urllib.request.urlopen(reference, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response:
                return [d for d in yaml.safe_load_all(response.read()) if d]
        except OSError as error:
            raise ReleaseManifestError(reference=reference, reason=str(error)) from error
