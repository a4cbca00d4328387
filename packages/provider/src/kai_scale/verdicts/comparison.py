"""Each scenario's details beside its previous comparable run (same node count and scenario). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kai_scale.verdicts.history import HistoricRun
from kai_scale.verdicts.values import detail_number


@dataclass(frozen=True, kw_only=True)
class DetailComparison:
    """One detail of one test, previous run against this one."""

    test_name: str
    """The test entry."""
    detail: str
    """The detail's name."""
    previous: float | None
    """The previous run's value (seconds for durations); None when it had none."""
    current: float
    """This run's value (seconds for durations)."""
    change_percent: float | None
    """(current - previous) / previous in percent; None without a previous non-zero value."""
    previous_run_id: str | None
    """The run ``previous`` comes from (None: no earlier run of the scenario produced results)."""


def measurements(tests: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """Every numeric or duration detail of every test entry, keyed by (test name, detail)."""
    found: dict[tuple[str, str], float] = {}
    for test in tests:
        for detail, raw in (test.get("details") or {}).items():
            value = detail_number(raw)
            if value is not None:
                found[(str(test["test_name"]), str(detail))] = value
    return found


def compare_runs(
    *, current: Sequence[Mapping[str, Any]], previous: HistoricRun | None
) -> list[DetailComparison]:
    """Per detail of one scenario's tests (``current``): previous / current / change %.

    :param previous: the scenario's previous comparable run (``history.previous_runs``).
    """
    before = measurements(previous.tests if previous else [])
    rows = []
    for (test_name, detail), value in measurements(current).items():
        old = before.get((test_name, detail))
        change = None if old is None or old == 0 else (value - old) / abs(old) * 100
        rows.append(
            DetailComparison(
                test_name=test_name,
                detail=detail,
                previous=old,
                current=value,
                change_percent=change,
                previous_run_id=previous.run_id if previous else None,
            )
        )
    return rows
