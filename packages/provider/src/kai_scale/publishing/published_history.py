"""Published runs read back from the bucket: the manifest, and the test entries of a run it lists."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.object_keys import manifest_key
from kai_scale.publishing.manifest import parse_manifest
from kai_scale.verdicts.history import HistoricRun

log = logging.getLogger(__name__)


def read_manifest(bucket: ResultsBucketHook, *, prefix: str) -> dict[str, Any] | None:
    """The manifest under ``prefix``, None when there is none; raise ManifestError when it is corrupt."""
    key = manifest_key(prefix)
    body = bucket.read_bytes(key)
    return None if body is None else parse_manifest(body, key=key)


def read_run(bucket: ResultsBucketHook, entry: Mapping[str, Any]) -> HistoricRun | None:
    """The test entries of the manifest entry's results.json; None (logged) when it is lost or unreadable."""
    text = bucket.read_text(str(entry.get("path", "")))
    try:
        tests = json.loads(text)["results"]["tests"] if text else None
    except (json.JSONDecodeError, KeyError, TypeError):
        tests = None
    if not isinstance(tests, list):
        log.warning(
            "run %s: results.json at %s unreadable, left out of the history",
            entry.get("run_id"),
            entry.get("path"),
        )
        return None
    return HistoricRun(run_id=str(entry["run_id"]), tests=tests)
