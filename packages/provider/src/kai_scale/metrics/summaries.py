"""Summaries of a series over a window: min, avg, max, p50, p90, p99. Pure."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

PERCENTILES = (50, 90, 99)


def summarize(values: Sequence[float]) -> dict[str, float | int] | None:
    """Summary of the finite values (NaN and infinities, which Prometheus returns, are left out).

    Percentiles interpolate linearly between samples (numpy's default), so one sample is every
    percentile. None when there is no finite value.
    """
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return None
    if len(finite) == 1:
        cuts = {p: finite[0] for p in PERCENTILES}
    else:
        quantiles = statistics.quantiles(finite, n=100, method="inclusive")
        cuts = {p: quantiles[p - 1] for p in PERCENTILES}
    return {
        "samples": len(finite),
        "min": min(finite),
        "avg": statistics.fmean(finite),
        "max": max(finite),
        **{f"p{p}": value for p, value in cuts.items()},
    }
