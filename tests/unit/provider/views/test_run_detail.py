"""The One run page's rows, from documents the pipeline's own functions make (``tests.failed_night``)."""

from __future__ import annotations

from typing import Any

from kai_scale.views.run_detail import detail_rows, metric_charts, metric_series, scenario_rows
from tests.failed_night import FILL, RECLAIM_REASON, failed_night, fill

# results.json of the failed night: the suite's entry, and the one the failed scenario adds.
RESULTS = {
    "results": {
        "tests": [
            *fill(490.0),
            {"test_name": "reclaim", "status": "failure", "details": {"scenario": "reclaim", "message": "m"}},
        ]
    }
}


def test_every_scenario_of_the_summary_with_its_tests_and_its_previous_run() -> None:
    summary, verdicts = failed_night()
    summary["scenarios"][0]["outcome"] = {"tests": fill(490.0)}
    fill_cluster, reclaim, topology = scenario_rows(summary, verdicts)
    assert fill_cluster.tests == [(FILL, "success", {"nodes": 500, "time": "490.0s"})]
    assert (fill_cluster.compared, fill_cluster.previous_run_id) == (True, "20260031-scheduled")
    assert (reclaim.status, reclaim.reason, reclaim.try_number, reclaim.tests) == (
        "failure",
        RECLAIM_REASON,
        1,
        [],
    )
    assert (reclaim.failure_kind, fill_cluster.failure_kind) == ("scenario", None)
    # A failed or skipped scenario produced nothing to compare.
    assert [(row.compared, row.previous_run_id) for row in (reclaim, topology)] == [(False, None)] * 2
    assert scenario_rows(None, verdicts) == []
    assert [row.compared for row in scenario_rows(summary, None)] == [False] * 3


def test_a_scenario_without_an_earlier_run_says_so() -> None:
    summary, verdicts = failed_night()
    verdicts["previous_run_ids"] = {"sanity-fill-cluster": None}
    fill_cluster = scenario_rows(summary, verdicts)[0]
    assert (fill_cluster.compared, fill_cluster.previous_run_id) == (True, None)


def test_each_detail_beside_its_scenarios_previous_run_with_the_findings() -> None:
    _, verdicts = failed_night()
    nodes, time, scenario, message = detail_rows(RESULTS, verdicts)
    assert (time.shown, time.previous_shown, time.previous_run_id, time.breach) == (
        "490.0s",
        "484 s",
        "20260031-scheduled",
        True,
    )
    assert time.change_percent is not None
    assert round(time.change_percent, 2) == 1.24
    assert time.threshold is not None
    assert "breaches" in time.threshold
    assert time.regression is not None
    assert "regressed since run 20260030-scheduled" in time.regression
    assert (nodes.previous_shown, nodes.previous_run_id, nodes.breach, nodes.regression) == (
        "500",
        "20260031-scheduled",
        False,
        None,
    )
    # The failed scenario's own entry was not compared.
    assert (scenario.test_name, scenario.status, scenario.previous_run_id) == ("reclaim", "failure", None)
    assert (message.shown, message.previous_shown) == ("m", "")
    # Before verdicts existed: the details alone.
    assert [(row.previous_shown, row.previous_run_id) for row in detail_rows(RESULTS, None)] == [
        ("", None)
    ] * 4


def test_a_verdicts_document_of_one_previous_run_for_all_names_it_on_every_compared_detail() -> None:
    """verdicts.json as it was written before each scenario was compared with its own previous run."""
    _, verdicts = failed_night()
    for judged in verdicts["tests"][FILL].values():
        judged.get("comparison", {}).pop("previous_run_id", None)
    older = {key: value for key, value in verdicts.items() if key != "previous_run_ids"}
    older["previous_run_id"] = "r-older"
    assert [row.previous_run_id for row in detail_rows(RESULTS, older)] == ["r-older", "r-older", None, None]


# metrics.json as the view reads it (the parts it reads: no summaries).
METRICS: dict[str, Any] = {
    "run_id": "r1",
    "prometheus": None,
    "step_seconds": 15.0,
    "scenarios": {
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
}


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
