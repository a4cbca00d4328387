from __future__ import annotations

import math

import pytest

from kai_scale.metrics.collection import RunMetrics, ScenarioMetrics, public_metrics
from kai_scale.metrics.summaries import summarize


def test_summary_of_a_series() -> None:
    summary = summarize([float(v) for v in range(1, 101)])
    assert summary is not None
    assert summary["samples"] == 100
    assert (summary["min"], summary["max"], summary["avg"]) == (1.0, 100.0, 50.5)
    # Linear interpolation between samples, as numpy.percentile does by default.
    assert summary["p50"] == pytest.approx(50.5)
    assert summary["p90"] == pytest.approx(90.1)
    assert summary["p99"] == pytest.approx(99.01)


def test_one_sample_is_every_percentile() -> None:
    assert summarize([3.0]) == {
        "samples": 1,
        "min": 3.0,
        "avg": 3.0,
        "max": 3.0,
        "p50": 3.0,
        "p90": 3.0,
        "p99": 3.0,
    }


def test_nan_and_infinity_are_left_out() -> None:
    summary = summarize([math.nan, 1.0, math.inf, 3.0, -math.inf])
    assert summary is not None
    assert (summary["samples"], summary["min"], summary["max"]) == (2, 1.0, 3.0)


@pytest.mark.parametrize("values", [[], [math.nan]])
def test_no_finite_value_is_no_summary(values: list[float]) -> None:
    assert summarize(values) is None


def test_published_metrics_carry_no_prometheus_address() -> None:
    internal = RunMetrics(
        run_id="r",
        prometheus="http://prometheus.monitoring.svc:9090/x",
        step_seconds=15.0,
        scenarios={
            "a": ScenarioMetrics(
                status="missing",
                reason="Prometheus at http://prometheus.monitoring.svc:9090/x is down",
                window=None,
                metrics={},
            )
        },
    )
    published = public_metrics(internal)
    assert "prometheus" not in published
    assert published["scenarios"]["a"]["reason"] == "Prometheus at <prometheus> is down"
    assert list(published) == ["run_id", "step_seconds", "scenarios"]
    assert internal.prometheus == "http://prometheus.monitoring.svc:9090/x", "the input is not changed"
