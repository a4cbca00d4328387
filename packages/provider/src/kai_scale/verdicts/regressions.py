"""Every numeric or duration detail of a run judged against its history at the same node count. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kai_scale.verdicts.acknowledgements import Acknowledgement, acknowledged_index
from kai_scale.verdicts.change_points import DEFAULT_METHOD, Better, ChangePoint, Method, detect_change
from kai_scale.verdicts.comparison import measurements
from kai_scale.verdicts.directions import DetailRule, rule_for
from kai_scale.verdicts.history import HistoricRun


@dataclass(frozen=True, kw_only=True)
class RegressionFinding:
    """A detail whose newest value starts a significant change in the bad direction."""

    test_name: str
    """The test entry."""
    detail: str
    """The detail."""
    better: Better
    """``lower`` or ``higher``."""
    change: ChangePoint
    """The change found."""
    since_run_id: str
    """The run that started it (what an acknowledgement names)."""
    reason: str
    """One line: before, after, change and p-value."""


def find_regressions(
    *,
    run_id: str,
    node_count: int,
    tests: Sequence[Mapping[str, Any]],
    history: Sequence[HistoricRun],
    acknowledgements: Sequence[Acknowledgement] = (),
    rules: Mapping[tuple[str, str], DetailRule] | None = None,
    method: Method = DEFAULT_METHOD,
) -> list[RegressionFinding]:
    """Regressions of this run (``tests``) against ``history`` (earlier runs, oldest first).

    Only the last ``method.window + method.max_tail`` runs are read, so a long history costs nothing.
    """
    recent = list(history[-(method.window + method.max_tail) :])
    past = [measurements(run.tests) for run in recent]
    findings = []
    for (test_name, detail), value in measurements(tests).items():
        runs = [
            (run.run_id, m[(test_name, detail)])
            for run, m in zip(recent, past, strict=True)
            if (test_name, detail) in m
        ]
        run_ids = [r for r, _ in runs] + [run_id]
        series = [v for _, v in runs] + [value]
        accepted = acknowledged_index(
            acknowledgements, test_name=test_name, detail=detail, node_count=node_count, run_ids=run_ids
        )
        rule = rule_for(test_name, detail, overrides=rules or {})
        if not rule.judge:
            continue
        change = detect_change(
            series, better=rule.better, min_change=rule.min_change, method=method, accepted=accepted
        )
        if change is None:
            continue
        since = run_ids[change.start]
        reason = (
            f"{test_name!r} / {detail!r} regressed since run {since}: {change.baseline:g} -> "
            f"{change.current:g} ({change.change_percent:+.1f} %, {rule.better} is better, "
            f"p={change.p_value:.2g})"
        )
        findings.append(
            RegressionFinding(
                test_name=test_name,
                detail=detail,
                better=rule.better,
                change=change,
                since_run_id=since,
                reason=reason,
            )
        )
    return findings
