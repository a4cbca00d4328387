"""Threshold values proposed from history: median of the last N comparable runs plus a margin. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from kai_scale.verdicts.comparison import measurements
from kai_scale.verdicts.directions import DetailRule, rule_for


def propose_thresholds(
    runs: Sequence[Sequence[Mapping[str, Any]]],
    *,
    last: int = 5,
    margin: float = 0.2,
    rules: Mapping[tuple[str, str], DetailRule] | None = None,
) -> list[dict[str, Any]]:
    """One ``thresholds:`` entry per detail seen in the last ``last`` runs (each run its test entries).

    The bound is the median times (1 + margin) where lower is better (a ``max``), times (1 - margin)
    where higher is better (a ``min``).
    """
    if last < 1 or not 0 <= margin < 1:
        raise ValueError(f"calibration: last must be >= 1 and margin in [0, 1), got {last} and {margin}")
    series: dict[tuple[str, str], list[float]] = {}
    for tests in runs[-last:]:
        for key, value in measurements(tests).items():
            series.setdefault(key, []).append(value)
    proposals = []
    for (test_name, detail), values in sorted(series.items()):
        rule = rule_for(test_name, detail, overrides=rules or {})
        if not rule.judge:
            continue
        median = statistics.median(values)
        if rule.better == "lower":
            bound = {"max": round(median * (1 + margin), 3)}
        else:
            bound = {"min": round(median * (1 - margin), 3)}
        proposals.append({"test_name": test_name, "detail": detail, **bound, "runs": len(values)})
    return proposals


def thresholds_yaml(proposals: Sequence[Mapping[str, Any]], *, margin: float) -> str:
    """The proposals as a scenario file's ``thresholds:`` block (durations as seconds)."""
    lines = [f"# proposed: median of the last runs {'+' if margin else ''}{margin:.0%} margin", "thresholds:"]
    for p in proposals:
        lines.append(f"  - test_name: {_quoted(p['test_name'])}  # median of {p['runs']} runs")
        lines.append(f"    detail: {_quoted(p['detail'])}")
        lines += [f"    {bound}: {p[bound]:g}" for bound in ("min", "max") if bound in p]
    return "\n".join(lines) + "\n"


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
