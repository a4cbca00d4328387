"""Which published runs a run is judged against: manifest entries of the same node count. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def comparable_entries(
    manifest: Mapping[str, Any], *, run_id: str, node_count: int, last: int | None = None
) -> list[dict[str, Any]]:
    """Manifest entries published before ``run_id`` with its node count, oldest first.

    Ordered by timestamp (run ids sort by time too); a run that is not yet in the manifest (judged
    before its entry is written) is compared with every entry. Failed runs are left out: their
    details are partial. ``last`` keeps only the newest so many.
    """
    runs = [run for run in manifest.get("runs", []) if isinstance(run, dict)]
    own = next((run for run in runs if run.get("run_id") == run_id), None)
    earlier = [
        run
        for run in runs
        if run.get("node_count") == node_count
        and run.get("run_id") != run_id
        and run.get("status") == "success"
        and (own is None or str(run.get("timestamp", "")) < str(own.get("timestamp", "")))
    ]
    earlier.sort(key=lambda run: (str(run.get("timestamp", "")), str(run.get("run_id", ""))))
    return earlier[-last:] if last else earlier
