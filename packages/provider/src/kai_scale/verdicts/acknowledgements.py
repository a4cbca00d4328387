"""Acknowledged change points (``Public/acknowledgements.json``): parsing and applying them. Pure.

``{"acknowledgements": [{"test_name", "detail", "node_count", "run_id", "by", "reason"}]}``: the run
that started an accepted change. The detail's history at that node count is then measured from the
accepted level (``change_points.detect_change``'s ``accepted``): the same change is not reported
again, while a later change against the new level is, as soon as it would be without one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

FIELDS = ("test_name", "detail", "node_count", "run_id", "by", "reason")


class AcknowledgementsError(ValueError):
    """The acknowledgements file is not what this module writes; the message names the entry."""


@dataclass(frozen=True, kw_only=True)
class Acknowledgement:
    """A change point a person has accepted."""

    test_name: str
    """The test entry."""
    detail: str
    """The detail."""
    node_count: int
    """The node count of the history it applies to."""
    run_id: str
    """The run that started the accepted change."""
    by: str
    """Who accepted it."""
    reason: str
    """Why (e.g. the KAI change that explains it)."""


def parse_acknowledgements(text: str, *, key: str) -> list[Acknowledgement]:
    """The file's entries; raise AcknowledgementsError naming ``key`` and the entry otherwise."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise AcknowledgementsError(f"{key} is not valid JSON: {error}") from error
    entries = document.get("acknowledgements") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise AcknowledgementsError(f'{key}: expected {{"acknowledgements": [...]}}')
    parsed = []
    for index, entry in enumerate(entries):
        missing = [name for name in FIELDS if not isinstance(entry, dict) or name not in entry]
        if missing:
            raise AcknowledgementsError(f"{key}: acknowledgements[{index}] lacks {', '.join(missing)}")
        parsed.append(Acknowledgement(**{name: entry[name] for name in FIELDS}))
    return parsed


def acknowledged_index(
    acknowledgements: Sequence[Acknowledgement],
    *,
    test_name: str,
    detail: str,
    node_count: int,
    run_ids: Sequence[str],
) -> int | None:
    """Index in ``run_ids`` (the series' runs, oldest first) of the detail's newest acknowledged run.

    None when no acknowledged run of this detail is among ``run_ids``.
    """
    found = [
        run_ids.index(ack.run_id)
        for ack in acknowledgements
        if (ack.test_name, ack.detail, ack.node_count) == (test_name, detail, node_count)
        and ack.run_id in run_ids
    ]
    return max(found, default=None)
