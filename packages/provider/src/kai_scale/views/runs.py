"""The Runs page: manifest entries as rows, newest first, filtered and paged. Pure.

The manifest is the dashboard's index and holds entries this pipeline did not write (no ``run_id``,
no ``node_count``): each row takes what its entry has, and its run id from its ``path`` if need be.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kai_scale.object_keys import PublishedKeys, published_keys_beside

PAGE_SIZE = 100


@dataclass(frozen=True, kw_only=True)
class RunRow:
    """One published run, as its manifest entry describes it."""

    run_id: str
    """The pipeline's run id (from the entry, else the folder of its ``path``)."""
    airflow_run_id: str | None
    """The Airflow DAG run it came from, when the entry says."""
    timestamp: str
    """When it ran, ISO 8601 UTC (``2026-11-22T02:00:00Z``); empty when the entry has none."""
    node_count: int | None
    """Simulated GPU nodes."""
    kai_ref: str | None
    """The KAI ref the run asked for."""
    commit: str | None
    """The KAI commit (or the ref, when the runner did not know the commit)."""
    status: str
    """``success``, ``failure`` (a scenario failed) or ``incomplete`` (one did not run)."""
    verdict: str | None
    """``pass``, ``failure``, ``threshold``, ``regression`` or ``incomplete``; None for older entries."""
    failure_kind: str | None
    """Whose failure: ``scenario`` (it ran and failed) or ``infrastructure`` (the pipeline's); None
    when the run did not fail, and for entries written before failures had a kind."""
    results_key: str
    """Its ``results.json`` (the entry's ``path``)."""
    failed_scenarios: tuple[str, ...] | None
    """The scenarios that failed, as the entry names them; None for entries written before it did
    (their ``results.json`` names them)."""
    not_run_scenarios: tuple[str, ...]
    """The scenarios that did not run (KAI missing or not ready); none for entries written before
    scenarios could end so."""

    @property
    def outcome(self) -> str:
        """What the Runs page shows and filters on: the verdict, or the status before verdicts existed."""
        return self.verdict or self.status

    @property
    def keys(self) -> PublishedKeys:
        """Its published objects."""
        return published_keys_beside(self.results_key)


def _row(entry: Mapping[str, Any]) -> RunRow | None:
    path = str(entry.get("path") or "")
    run_id = str(entry.get("run_id") or path.rpartition("/")[0].rpartition("/")[2])
    if not run_id or not path:
        return None
    node_count = entry.get("node_count")
    failed = entry.get("failed_scenarios")
    not_run = entry.get("not_run_scenarios")
    return RunRow(
        run_id=run_id,
        airflow_run_id=_text(entry.get("airflow_run_id")),
        timestamp=str(entry.get("timestamp") or ""),
        node_count=node_count if isinstance(node_count, int) and not isinstance(node_count, bool) else None,
        kai_ref=_text(entry.get("kai_ref")),
        commit=_text(entry.get("commit")),
        status=str(entry.get("status") or "unknown"),
        verdict=_text(entry.get("verdict")),
        failure_kind=_text(entry.get("failure_kind")),
        results_key=path,
        failed_scenarios=tuple(str(name) for name in failed) if isinstance(failed, list) else None,
        not_run_scenarios=tuple(str(name) for name in not_run) if isinstance(not_run, list) else (),
    )


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def run_rows(manifest: Mapping[str, Any]) -> list[RunRow]:
    """Every run of the manifest, newest first; entries without a path are left out (nothing to show).

    A run published twice has one entry (the publisher upserts), so run ids are unique.
    """
    rows = [row for entry in manifest.get("runs", []) if (row := _row(entry)) is not None]
    rows.sort(key=lambda row: (row.timestamp, row.run_id), reverse=True)
    return rows


def failed_scenarios(results: Mapping[str, Any] | None) -> list[str]:
    """The scenarios a results document names as failed (each adds an entry named after itself)."""
    tests = ((results or {}).get("results") or {}).get("tests") or []
    return [
        str(test["details"]["scenario"])
        for test in tests
        if test.get("status") == "failure"
        and isinstance(test.get("details"), dict)
        and "scenario" in test["details"]
    ]


@dataclass(frozen=True, kw_only=True)
class RunFilter:
    """What the Runs page was asked to show."""

    outcome: str | None = None
    """Only runs with this outcome (verdict, or status for older entries)."""
    node_count: int | None = None
    """Only runs at this node count."""
    text: str | None = None
    """Only runs whose run id, Airflow run id, KAI ref, commit, status, verdict, failure kind or a
    failed or not-run scenario (as the manifest entry names them) contains it."""


def _matches_text(row: RunRow, text: str) -> bool:
    # The manifest's fields only: searching 10,000 runs reads no other document.
    needle = text.lower()
    fields = (
        row.run_id,
        row.airflow_run_id,
        row.kai_ref,
        row.commit,
        row.status,
        row.verdict,
        row.failure_kind,
        *(row.failed_scenarios or ()),
        *row.not_run_scenarios,
    )
    return any(needle in field.lower() for field in fields if field)


def filter_runs(rows: Sequence[RunRow], wanted: RunFilter) -> list[RunRow]:
    """The rows ``wanted`` selects, in their order."""
    return [
        row
        for row in rows
        if (wanted.outcome is None or row.outcome == wanted.outcome)
        and (wanted.node_count is None or row.node_count == wanted.node_count)
        and (not wanted.text or _matches_text(row, wanted.text))
    ]


@dataclass(frozen=True, kw_only=True)
class Page:
    """One page of rows."""

    rows: list[RunRow]
    """The rows on this page."""
    number: int
    """This page, from 1."""
    count: int
    """How many pages the selection fills (at least 1)."""
    total: int
    """Rows in the selection."""


def page_of(rows: Sequence[RunRow], number: int, size: int = PAGE_SIZE) -> Page:
    """Page ``number`` (from 1, clamped to the pages there are) of ``size`` rows."""
    count = max(1, -(-len(rows) // size))
    number = min(max(1, number), count)
    return Page(
        rows=list(rows[(number - 1) * size : number * size]), number=number, count=count, total=len(rows)
    )
