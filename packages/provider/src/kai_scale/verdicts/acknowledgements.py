"""Acknowledged change points (``Public/acknowledgements.json``): parsing and applying them. Pure.

``{"acknowledgements": [{"test_name", "detail", "node_count", "run_id", "by", "reason"}]}``: the run
that started an accepted change. From that run on, the detail's history at that node count begins
there, so the accepted level is the baseline and the same change is not reported again, while a later
change against the new level still is.
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


def history_start(
    acknowledgements: Sequence[Acknowledgement],
    *,
    test_name: str,
    detail: str,
    node_count: int,
    run_ids: Sequence[str],
) -> int:
    """Index in ``run_ids`` (the series' runs, oldest first) where the detail's history begins."""
    start = 0
    for ack in acknowledgements:
        if (ack.test_name, ack.detail, ack.node_count) == (
            test_name,
            detail,
            node_count,
        ) and ack.run_id in run_ids:
            start = max(start, run_ids.index(ack.run_id))
    return start
