"""Does the newest run start a significant change in the bad direction? One series at a time. Pure.

Apache Otava's change-point detection (E-divisive over sliding windows, each candidate confirmed by a
t-test: the method of orion and Nyrkiö) finds the change points of the detail's recent history; the
newest run is flagged when the last change point is among its newest ``max_tail`` runs, goes in the
bad direction and is at least ``min_change`` large. Otava gives the change's p-value: how sure the
finding is. Each series is analysed alone, so adding a metric never changes another's result.

After an acknowledged change the history is kept, measured from the accepted level: the runs before
the acknowledged one are scaled to it, so a new change is judged against as many runs as any other,
and the acknowledged change point (and any before it) is never reported.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from otava.analysis import compute_change_points

Better = Literal["lower", "higher"]


@dataclass(frozen=True, kw_only=True)
class Method:
    """The method's parameters (written into verdicts.json)."""

    window: int = 30
    """Otava's sliding window (``window_len``), and the earlier runs read at most."""
    min_baseline: int = 10
    """Fewer earlier runs than this: nothing is judged."""
    max_tail: int = 3
    """The change may have started this many runs ago at most (1 = the newest alone)."""
    max_p_value: float = 0.001
    """Otava's significance threshold for a change point."""
    ack_tolerance: int = 2
    """Runs by which Otava may later place an acknowledged change away from the acknowledged run."""


@dataclass(frozen=True, kw_only=True)
class ChangePoint:
    """A significant change in the bad direction that the newest run is part of."""

    start: int
    """Index in the series of the first run of the changed level."""
    baseline: float
    """Mean of the runs before the change (within Otava's segment; after an acknowledgement, the runs
    before the acknowledged one scaled to its level)."""
    current: float
    """Mean of the runs since ``start``."""
    change_percent: float
    """(current - baseline) / baseline in percent."""
    p_value: float
    """Otava's t-test p-value of the change: how likely noise alone gives it."""


DEFAULT_METHOD = Method()


def detect_change(
    values: Sequence[float],
    *,
    better: Better,
    min_change: float,
    method: Method = DEFAULT_METHOD,
    accepted: int | None = None,
) -> ChangePoint | None:
    """The change the newest value (``values[-1]``) starts or continues, if significant and bad.

    :param values: the detail's history, oldest first, the run being judged last.
    :param min_change: relative change (0.05 = 5 %) below which nothing is flagged.
    :param accepted: index in ``values`` of the run that started an acknowledged change, if any.
    """
    offset = max(0, len(values) - (method.window + method.max_tail))
    recent = [float(v) for v in values[offset:]]
    if len(recent) - 1 < method.min_baseline:
        return None
    # An acknowledgement older than the analysed runs leaves nothing to scale or to pass over.
    acknowledged = accepted - offset if accepted is not None and accepted >= offset else None
    series = recent if acknowledged is None else _at_accepted_level(recent, acknowledged, method.max_tail)
    points, _ = compute_change_points(
        series, window_len=method.window, max_pvalue=method.max_p_value, min_magnitude=min_change
    )
    if acknowledged is not None:
        through = _accepted_through([p.index for p in points], acknowledged, method.ack_tolerance)
        points = [p for p in points if p.index > through]
    if not points or points[-1].index < len(series) - method.max_tail:
        return None
    last = points[-1]
    before, after = float(last.stats.mean_1), float(last.stats.mean_2)
    worse = after - before if better == "lower" else before - after
    if before == 0 or worse / abs(before) < min_change:
        return None
    return ChangePoint(
        start=offset + last.index,
        baseline=before,
        current=after,
        change_percent=(after - before) / abs(before) * 100,
        p_value=float(last.stats.pvalue),
    )


def _at_accepted_level(values: list[float], acknowledged: int, max_tail: int) -> list[float]:
    """``values`` with the runs before ``acknowledged`` scaled to the accepted level.

    The accepted level is the mean of the runs from the acknowledged one up to the newest
    ``max_tail`` (at least the acknowledged run): a change reported now starts among those newest runs,
    so they are left out of the level it is measured from.
    """
    before = values[:acknowledged]
    level_before = statistics.fmean(before) if before else 0.0
    if level_before <= 0:
        # Nothing before it, or no ratio to scale by (a count that was 0): the values as they are.
        return values
    since = values[acknowledged : max(acknowledged + 1, len(values) - max_tail)]
    factor = statistics.fmean(since) / level_before
    return [value * factor for value in before] + values[acknowledged:]


def _accepted_through(points: Sequence[int], acknowledged: int, tolerance: int) -> int:
    """Index of the last accepted change point: the acknowledged run, or a later change point nearest it.

    Later runs can move Otava's estimate of where the acknowledged change started by a run or two; the
    change point nearest the acknowledged run, within ``tolerance`` runs, is taken to be that change.
    """
    near = [index for index in points if abs(index - acknowledged) <= tolerance]
    return max(acknowledged, min(near, key=lambda index: abs(index - acknowledged))) if near else acknowledged
