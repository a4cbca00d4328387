"""The Trends page: one chart per test entry and detail, over a window of runs at one node count. Pure.

A chart's points are the runs' values of that detail, read as the verdicts read them (durations in
seconds); its marks are what a person looks for in a trend: runs that failed, incomplete runs without
a value (their scenarios did not run: KAI missing or not ready), the bounds of the scenario's
threshold and the runs the verdicts flagged as a regression (from ``verdicts.json``, when the run has
one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kai_scale.verdicts.comparison import measurements
from kai_scale.views.runs import RunRow, failed_scenarios

# "throughput average (pods/s)" carries its unit in its name.
_UNIT_IN_NAME = re.compile(r"\(([^()]+)\)\s*$")


def test_entries(results: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The test entries of a ``results.json`` (none when it could not be read)."""
    return list(((results or {}).get("results") or {}).get("tests") or [])


@dataclass(frozen=True, kw_only=True)
class PublishedRun:
    """A run with the documents a chart reads."""

    row: RunRow
    """Its manifest entry."""
    results: Mapping[str, Any] | None
    """Its ``results.json`` (None when it could not be read)."""
    verdicts: Mapping[str, Any] | None
    """Its ``verdicts.json`` (None for runs published before verdicts, or unreadable)."""

    def tests(self) -> list[Mapping[str, Any]]:
        """Its test entries."""
        return test_entries(self.results)

    def judged(self, test_name: str, detail: str) -> Mapping[str, Any]:
        """What its verdicts say about one detail (``threshold``, ``change_point``, ``comparison``)."""
        return dict(((self.verdicts or {}).get("tests") or {}).get(test_name, {}).get(detail) or {})


def runs_in_window(
    rows: Sequence[RunRow],
    *,
    node_count: int,
    now: datetime,
    days: int | None = None,
    last: int | None = None,
) -> list[RunRow]:
    """The runs at ``node_count`` of the last ``days`` days before ``now``, or its newest ``last``.

    :param rows: newest first (as ``run_rows`` gives them); the window is returned oldest first.
    """
    at_count = [row for row in rows if row.node_count == node_count]
    if last is not None:
        chosen = at_count[:last]
    else:
        since = (now - timedelta(days=days or 30)).strftime("%Y-%m-%dT%H:%M:%SZ")
        chosen = [row for row in at_count if row.timestamp >= since]
    return chosen[::-1]


def _measurements(test: Mapping[str, Any]) -> dict[str, tuple[float, object]]:
    """A test entry's details as the verdicts measure them (``measurements``): (number, as written)."""
    details = test.get("details") or {}
    return {detail: (number, details[detail]) for (_, detail), number in measurements([test]).items()}


@dataclass(frozen=True, kw_only=True)
class ChartList:
    """The charts of a window, and the details not worth one."""

    charts: list[tuple[str, str]]
    """(test name, detail) of every detail whose value changes over the window, in the order the runs
    first give them."""
    unchanged: list[tuple[str, str, str]]
    """(test name, detail, value as written) of details with one value in every run (``nodes``)."""


def chart_list(results: Sequence[Mapping[str, Any] | None]) -> ChartList:
    """What the Trends page draws for the runs' ``results.json``: a chart per detail that changes.

    A flat line says nothing. The runs' verdicts are not needed to know which: each chart's marks load
    with its data.
    """
    values: dict[tuple[str, str], list[tuple[float, object]]] = {}
    for document in results:
        for test in test_entries(document):
            for detail, measured in _measurements(test).items():
                values.setdefault((str(test.get("test_name")), detail), []).append(measured)
    charts = [key for key, seen in values.items() if len(seen) < 2 or len({number for number, _ in seen}) > 1]
    unchanged = [
        (test, detail, str(seen[0][1]))
        for (test, detail), seen in values.items()
        if (test, detail) not in charts
    ]
    return ChartList(charts=charts, unchanged=unchanged)


@dataclass(frozen=True, kw_only=True)
class TrendPoint:
    """One run's value of the detail."""

    run_id: str
    """The run."""
    timestamp: str
    """When it ran."""
    value: float
    """The value (seconds for durations)."""
    shown: str
    """The value as the run wrote it (``6m36.7s``)."""
    kai_ref: str | None
    """The KAI ref it ran."""
    commit: str | None
    """The KAI commit it ran."""
    outcome: str
    """The run's verdict (or status)."""
    breach: bool
    """Whether this value breached the scenario's threshold."""


@dataclass(frozen=True, kw_only=True)
class TrendMark:
    """A run marked on the chart, and why."""

    run_id: str
    """The run."""
    timestamp: str
    """When it ran."""
    text: str
    """What happened, in a line."""
    value: float | None = None
    """Where on the value axis: the run's value of the detail, if it has one."""


@dataclass(frozen=True, kw_only=True)
class Trend:
    """One chart: a detail of a test entry over the window."""

    test_name: str
    """The test entry."""
    detail: str
    """The detail."""
    unit: str
    """The value axis' unit: ``s`` for durations, else what the detail's name says (``pods/s``), or ``""``."""
    points: list[TrendPoint] = field(default_factory=list)
    """The runs that have a value, oldest first."""
    failures: list[TrendMark] = field(default_factory=list)
    """Runs that failed (this test, or another scenario), at their value when they have one."""
    not_run: list[TrendMark] = field(default_factory=list)
    """Incomplete runs without a value: scenarios did not run, so nothing was measured (no failure)."""
    regressions: list[TrendMark] = field(default_factory=list)
    """Runs the verdicts flagged: this detail changed significantly for the worse."""
    bound_min: float | None = None
    """The threshold's lower bound, as the newest run that was judged against one has it."""
    bound_max: float | None = None
    """The threshold's upper bound, likewise."""


def _unit(detail: str, written: Sequence[object]) -> str:
    if any(isinstance(raw, str) for raw in written):
        return "s"
    named = _UNIT_IN_NAME.search(detail)
    return named.group(1) if named else ""


def trend(runs: Sequence[PublishedRun], *, test_name: str, detail: str) -> Trend:
    """The chart of ``detail`` of ``test_name`` over ``runs`` (oldest first)."""
    points: list[TrendPoint] = []
    failures: list[TrendMark] = []
    not_run: list[TrendMark] = []
    regressions: list[TrendMark] = []
    written: list[object] = []
    bounds: tuple[float | None, float | None] = (None, None)
    for run in runs:
        row = run.row
        test = next((t for t in run.tests() if t.get("test_name") == test_name), None)
        measured = _measurements(test).get(detail) if test else None
        judged = run.judged(test_name, detail)
        threshold = judged.get("threshold") or {}
        if threshold.get("min") is not None or threshold.get("max") is not None:
            bounds = (threshold.get("min"), threshold.get("max"))
        if measured is not None:
            value, raw = measured
            written.append(raw)
            points.append(
                TrendPoint(
                    run_id=row.run_id,
                    timestamp=row.timestamp,
                    value=value,
                    shown=str(raw),
                    kai_ref=row.kai_ref,
                    commit=row.commit,
                    outcome=row.outcome,
                    breach=threshold.get("status") == "breach",
                )
            )
        if test is not None and test.get("status") == "failure":
            message = (test.get("details") or {}).get("message")
            text = f"{test_name} failed" + (f": {message}" if message else "")
            failures.append(_mark(row, text, value=measured[0] if measured else None))
        elif row.status == "failure":
            scenarios = ", ".join(failed_scenarios(run.results)) or "a scenario"
            failures.append(
                _mark(row, f"the run failed ({scenarios})", value=measured[0] if measured else None)
            )
        elif row.status == "incomplete" and measured is None:
            scenarios = ", ".join(row.not_run_scenarios) or "a scenario"
            not_run.append(_mark(row, f"not measured: the run is incomplete ({scenarios} did not run)"))
        change = judged.get("change_point")
        if change and measured is not None:
            regressions.append(_mark(row, str(change.get("reason") or "regression"), value=measured[0]))
    return Trend(
        test_name=test_name,
        detail=detail,
        unit=_unit(detail, written),
        points=points,
        failures=failures,
        not_run=not_run,
        regressions=regressions,
        bound_min=bounds[0],
        bound_max=bounds[1],
    )


def _mark(row: RunRow, text: str, *, value: float | None = None) -> TrendMark:
    return TrendMark(run_id=row.run_id, timestamp=row.timestamp, text=text, value=value)
