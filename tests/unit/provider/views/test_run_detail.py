from __future__ import annotations

from datetime import timedelta

from kai_scale.metrics.collection import metrics_document
from kai_scale.views.run_detail import detail_rows, metric_charts, metric_series, scenario_rows

FILL = "Fill Cluster with single GPU Jobs"


def test_every_scenario_of_the_summary_with_its_tests() -> None:
    summary = {
        "scenarios": [
            {
                "scenario": "sanity-fill-cluster",
                "status": "success",
                "reason": None,
                "try_number": 1,
                "outcome": {"tests": [{"test_name": FILL, "status": "success", "details": {"time": "6m"}}]},
            },
            {
                "scenario": "reclaim",
                "status": "failure",
                "reason": "no outcome",
                "try_number": 2,
                "outcome": None,
            },
        ]
    }
    fill, reclaim = scenario_rows(summary)
    assert fill.tests == [(FILL, "success", {"time": "6m"})]
    assert (reclaim.status, reclaim.reason, reclaim.try_number, reclaim.tests) == (
        "failure",
        "no outcome",
        2,
        [],
    )
    assert scenario_rows(None) == []


def test_each_detail_beside_the_previous_run_with_the_findings() -> None:
    results = {
        "results": {
            "tests": [
                {"test_name": FILL, "status": "success", "details": {"time": "8m10s", "jobs": 4000}},
                {
                    "test_name": "reclaim",
                    "status": "failure",
                    "details": {"scenario": "reclaim", "message": "m"},
                },
            ]
        }
    }
    verdicts = {
        "tests": {
            FILL: {
                "time": {
                    "comparison": {"previous": 396.0, "current": 490.0, "change_percent": 23.7},
                    "threshold": {
                        "status": "breach",
                        "reason": "'Fill' / 'time' = 8m10s (490) breaches max 420",
                    },
                    "change_point": {"reason": "'Fill' / 'time' regressed since run r1"},
                },
                "jobs": {"comparison": {"previous": 4000.0, "current": 4000.0, "change_percent": 0.0}},
            }
        }
    }
    time, jobs, scenario, message = detail_rows(results, verdicts)
    assert (time.shown, time.previous_shown, time.change_percent, time.breach) == (
        "8m10s",
        "396 s",
        23.7,
        True,
    )
    assert time.threshold == "'Fill' / 'time' = 8m10s (490) breaches max 420"
    assert time.regression == "'Fill' / 'time' regressed since run r1"
    assert (jobs.previous_shown, jobs.breach, jobs.regression) == ("4000", False, None)
    assert (scenario.test_name, scenario.status, message.shown, message.previous_shown) == (
        "reclaim",
        "failure",
        "m",
        "",
    )
    # Before verdicts existed: the details alone.
    assert [row.previous_shown for row in detail_rows(results, None)] == ["", "", "", ""]


METRICS = metrics_document(
    run_id="r1",
    prometheus_url=None,
    step=timedelta(seconds=15),
    scenarios={
        "sanity-fill-cluster": {
            "status": "partial",
            "reason": "queries failed: binder_errors",
            "window": {
                "start": "2026-11-22T02:00:00+00:00",
                "end": "2026-11-22T02:08:00+00:00",
                "source": "runner",
            },
            "metrics": {
                "latency_p99": {
                    "unit": "ms",
                    "description": "e2e scheduling latency p99",
                    "status": "ok",
                    "error": None,
                    "series": [
                        {
                            "labels": {"action": "allocate", "pod": "s-0"},
                            "values": [[1795384800, 41.0], [1795384815, None]],
                        },
                        {"labels": {}, "values": []},
                    ],
                },
                "binder_errors": {
                    "unit": "1/s",
                    "description": "",
                    "status": "missing",
                    "error": "bad query",
                },
            },
        }
    },
)


def test_every_query_of_every_scenario_is_a_chart_or_says_why_not() -> None:
    latency, errors = metric_charts(METRICS)
    assert (latency.scenario, latency.name, latency.unit, latency.status, latency.series_count) == (
        "sanity-fill-cluster",
        "latency_p99",
        "ms",
        "ok",
        2,
    )
    assert (errors.status, errors.error, errors.series_count) == ("missing", "bad query", 0)


def test_a_charts_series_are_labelled_and_timed_in_milliseconds() -> None:
    series = metric_series(METRICS, scenario="sanity-fill-cluster", name="latency_p99")
    assert series is not None
    assert series["window"]["end"] == "2026-11-22T02:08:00+00:00"
    assert series["series"] == [
        {"label": "action=allocate, pod=s-0", "points": [[1795384800000, 41.0], [1795384815000, None]]},
        {"label": "latency_p99", "points": []},
    ]
    assert metric_series(METRICS, scenario="sanity-fill-cluster", name="nothing") is None
    assert metric_series(METRICS, scenario="nothing", name="latency_p99") is None
