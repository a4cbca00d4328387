"""Scheduling throughput from bind times, as scheduler_perf's SchedulingThroughput reports it. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Throughput:
    """Pods scheduled per second over the measurement."""

    average: float
    """All pods over the time from the first creation to the last binding."""
    p50: float
    """Median of the per-second samples."""
    p90: float
    """90th percentile of the per-second samples."""
    p99: float
    """99th percentile of the per-second samples."""
    seconds_to_all_scheduled: float
    """From the first creation to the last binding."""


def percentile(samples: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (as scheduler_perf computes its throughput percentiles)."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def throughput(*, started: float, scheduled_at: Sequence[float]) -> Throughput:
    """Summarise bind times (seconds, same clock as ``started``) into per-second samples."""
    if not scheduled_at:
        return Throughput(average=0.0, p50=0.0, p90=0.0, p99=0.0, seconds_to_all_scheduled=0.0)
    last = max(scheduled_at)
    elapsed = max(last - started, 1e-9)
    buckets = [0] * (int(elapsed) + 1)
    for moment in scheduled_at:
        buckets[min(int(moment - started), len(buckets) - 1)] += 1
    # The last bucket is partial; scheduler_perf drops it unless it is the only one.
    samples = [float(count) for count in (buckets[:-1] or buckets)]
    return Throughput(
        average=len(scheduled_at) / elapsed,
        p50=percentile(samples, 0.5),
        p90=percentile(samples, 0.9),
        p99=percentile(samples, 0.99),
        seconds_to_all_scheduled=elapsed,
    )
