"""Does the newest run start a significant change in the bad direction? One series at a time. Pure.

Apache Otava's change-point detection (E-divisive over sliding windows, each candidate confirmed by a
t-test: the method of orion and Nyrkiö) finds the change points of the detail's recent history; the
newest run is flagged when the last change point is among its newest ``max_tail`` runs, goes in the
bad direction and is at least ``min_change`` large. Otava gives the change's p-value: how sure the
finding is. Each series is analysed alone, so adding a metric never changes another's result.
"""

from __future__ import annotations

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


@dataclass(frozen=True, kw_only=True)
class ChangePoint:
    """A significant change in the bad direction that the newest run is part of."""

    start: int
    """Index in the series of the first run of the changed level."""
    baseline: float
    """Mean of the runs before the change (within Otava's segment)."""
    current: float
    """Mean of the runs since ``start``."""
    change_percent: float
    """(current - baseline) / baseline in percent."""
    p_value: float
    """Otava's t-test p-value of the change: how likely noise alone gives it."""


DEFAULT_METHOD = Method()


def detect_change(
    values: Sequence[float], *, better: Better, min_change: float, method: Method = DEFAULT_METHOD
) -> ChangePoint | None:
    """The change the newest value (``values[-1]``) starts or continues, if significant and bad.

    :param values: the detail's history, oldest first, the run being judged last.
    :param min_change: relative change (0.05 = 5 %) below which nothing is flagged.
    """
    recent = [float(v) for v in values[-(method.window + method.max_tail) :]]
    if len(recent) - 1 < method.min_baseline:
        return None
    points, _ = compute_change_points(
        recent, window_len=method.window, max_pvalue=method.max_p_value, min_magnitude=min_change
    )
    if not points or points[-1].index < len(recent) - method.max_tail:
        return None
    last = points[-1]
    before, after = float(last.stats.mean_1), float(last.stats.mean_2)
    worse = after - before if better == "lower" else before - after
    if before == 0 or worse / abs(before) < min_change:
        return None
    return ChangePoint(
        start=len(values) - len(recent) + last.index,
        baseline=before,
        current=after,
        change_percent=(after - before) / abs(before) * 100,
        p_value=float(last.stats.pvalue),
    )
