"""``manifest.json``, the dashboard's index of runs: parsing it safely and upserting one run. Pure.

The manifest is history: a document that does not parse is refused, never replaced, and entries
this pipeline did not write are kept as they are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class ManifestError(ValueError):
    """The manifest exists but is not a manifest; publishing stops rather than overwrite it."""


def parse_manifest(body: bytes | str, *, key: str) -> dict[str, Any]:
    """The manifest document; raise ManifestError naming ``key`` when it is not ``{"runs": [...]}``."""
    refusal = f"refusing to overwrite {key}: fix or restore it (e.g. from the bucket's object versions)"
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
    except UnicodeDecodeError as error:
        # Decoding leniently and writing back would replace the undecodable history for good.
        raise ManifestError(f"{key} is not UTF-8 text ({error}); {refusal}") from error
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ManifestError(f"{key} is not valid JSON ({error}); {refusal}") from error
    if not isinstance(document, dict) or not isinstance(document.get("runs"), list):
        raise ManifestError(f'{key} is not a manifest (expected {{"runs": [...]}}); {refusal}')
    if not all(isinstance(run, dict) for run in document["runs"]):
        raise ManifestError(f"{key}: every entry of 'runs' must be an object; {refusal}")
    return document


def empty_manifest() -> dict[str, Any]:
    """The manifest before the first run."""
    return {"runs": []}


def upsert_run(manifest: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    """A new manifest with ``entry`` in place of the entry of the same run, or appended.

    An entry is the same run when its ``run_id`` matches, or, for entries without one, its ``path``.
    """

    def same_run(run: Mapping[str, Any]) -> bool:
        if "run_id" in run:
            return bool(run["run_id"] == entry["run_id"])
        return bool(run.get("path") == entry["path"])

    runs = list(manifest["runs"])
    positions = [index for index, run in enumerate(runs) if same_run(run)]
    if positions:
        runs[positions[0]] = dict(entry)
        # Duplicates of this run (never written by us, but possible by hand) collapse into one.
        runs = [run for index, run in enumerate(runs) if index not in positions[1:]]
    else:
        runs.append(dict(entry))
    return {**manifest, "runs": runs}


def manifest_text(manifest: Mapping[str, Any]) -> str:
    """Serialised manifest (compact: it grows by one entry per night, for years)."""
    return json.dumps(manifest, separators=(",", ":"))
