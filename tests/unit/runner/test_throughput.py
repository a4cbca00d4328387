from __future__ import annotations

import pytest

from kai_scale_runner.throughput import percentile, throughput


def test_percentile_is_nearest_rank() -> None:
    samples = [float(v) for v in range(1, 101)]
    assert percentile(samples, 0.5) == 50
    assert percentile(samples, 0.9) == 90
    assert percentile(samples, 0.99) == 99
    assert percentile([], 0.5) == 0


def test_per_second_samples_drop_the_partial_last_second() -> None:
    # 100 pods in each of seconds 0, 1, 2; then 10 pods in the partial second 3.
    times = [s + i / 100 for s in range(3) for i in range(100)] + [3.0 + i / 100 for i in range(10)]
    result = throughput(started=0.0, scheduled_at=times)
    assert result.p50 == result.p90 == result.p99 == 100
    assert result.seconds_to_all_scheduled == pytest.approx(3.09)
    assert result.average == pytest.approx(310 / 3.09)


def test_nothing_scheduled() -> None:
    assert throughput(started=5.0, scheduled_at=[]).average == 0
