from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kai_scale.views.runs import RunRow
from kai_scale.views.trends import PublishedRun, chart_list, runs_in_window, trend

FILL = "Fill Cluster with single GPU Jobs"
THROUGHPUT = "GPU pod scheduling throughput"


def _row(day: int, *, node_count: int = 500, status: str = "success", verdict: str = "pass") -> RunRow:
    return RunRow(
        run_id=f"run-{day:02d}",
        airflow_run_id=None,
        timestamp=f"2026-11-{day:02d}T02:00:00Z",
        node_count=node_count,
        kai_ref="v0.9.0",
        commit=f"c{day:02d}",
        status=status,
        verdict=verdict,
        failure_kind=None,
        results_key=f"Public/run-{day:02d}/results.json",
        failed_scenarios=(),
        not_run_scenarios=("sanity-fill-cluster", "reclaim") if status == "incomplete" else (),
    )


def _run(
    day: int,
    tests: list[dict[str, Any]],
    *,
    status: str = "success",
    judged: dict[str, Any] | None = None,
) -> PublishedRun:
    return PublishedRun(
        row=_row(day, status=status),
        results={"results": {"status": status, "tests": tests}},
        verdicts={"verdict": "pass", "tests": {FILL: {"time": judged}}} if judged else None,
    )


def _fill(time: str, *, status: str = "success", **details: Any) -> dict[str, Any]:
    return {"test_name": FILL, "status": status, "details": {"nodes": 500, "time": time, **details}}


NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
ROWS = [_row(22), _row(21, node_count=100), _row(20), _row(5), _row(1)]


def test_the_window_is_the_last_days_at_one_node_count_oldest_first() -> None:
    assert [row.run_id for row in runs_in_window(ROWS, node_count=500, now=NOW, days=30)] == [
        "run-01",
        "run-05",
        "run-20",
        "run-22",
    ]
    assert [row.run_id for row in runs_in_window(ROWS, node_count=500, now=NOW, days=4)] == [
        "run-20",
        "run-22",
    ]


def test_the_window_can_be_the_last_runs() -> None:
    assert [row.run_id for row in runs_in_window(ROWS, node_count=500, now=NOW, last=2)] == [
        "run-20",
        "run-22",
    ]
    assert runs_in_window(ROWS, node_count=7, now=NOW, last=2) == []


def test_a_detail_with_one_value_throughout_gets_no_chart_but_is_listed() -> None:
    runs = [_run(1, [_fill("6m30s", jobs=4000)]), _run(2, [_fill("6m40s", jobs=4000)])]
    listed = chart_list([run.results for run in runs])
    assert listed.charts == [(FILL, "time")]
    assert listed.unchanged == [(FILL, "nodes", "500"), (FILL, "jobs", "4000")]
    # One run: nothing has changed yet, everything is charted.
    assert chart_list([runs[0].results]).charts == [(FILL, "nodes"), (FILL, "time"), (FILL, "jobs")]
    assert chart_list([None]) == chart_list([]), "an unreadable results.json has no details"


def test_durations_are_plotted_in_seconds_and_shown_as_written() -> None:
    drawn = trend([_run(1, [_fill("6m30s")]), _run(2, [_fill("6m40.5s")])], test_name=FILL, detail="time")
    assert drawn.unit == "s"
    assert [(point.value, point.shown, point.commit) for point in drawn.points] == [
        (390.0, "6m30s", "c01"),
        (400.5, "6m40.5s", "c02"),
    ]


def test_a_unit_in_the_details_name_is_the_axis_unit() -> None:
    test = {"test_name": THROUGHPUT, "status": "success", "details": {"throughput average (pods/s)": 110.5}}
    drawn = trend([_run(1, [test])], test_name=THROUGHPUT, detail="throughput average (pods/s)")
    assert drawn.unit == "pods/s"
    assert trend([_run(1, [_fill("6m")])], test_name=FILL, detail="nodes").unit == ""


def test_failures_are_marked_at_their_value_or_without_one() -> None:
    reclaim_failed = {"test_name": "reclaim", "status": "failure", "details": {"scenario": "reclaim"}}
    runs = [
        _run(1, [_fill("6m30s")]),
        _run(2, [_fill("6m35s"), reclaim_failed], status="failure"),
        _run(3, [_fill("9m", status="failure", message="timed out")], status="failure"),
        _run(
            4,
            [reclaim_failed, {**reclaim_failed, "test_name": "fill", "details": {"scenario": "fill"}}],
            status="failure",
        ),
    ]
    drawn = trend(runs, test_name=FILL, detail="time")
    assert [point.run_id for point in drawn.points] == ["run-01", "run-02", "run-03"]
    assert [(mark.run_id, mark.text, mark.value) for mark in drawn.failures] == [
        ("run-02", "the run failed (reclaim)", 395.0),
        ("run-03", f"{FILL} failed: timed out", 540.0),
        ("run-04", "the run failed (reclaim, fill)", None),
    ]


def test_an_incomplete_run_without_a_value_is_marked_not_run_not_failed() -> None:
    def not_run(scenario: str) -> dict[str, Any]:
        return {"test_name": scenario, "status": "not_run", "details": {"scenario": scenario}}

    throughput = {"test_name": THROUGHPUT, "status": "success", "details": {"pods": 400}}
    runs = [
        _run(1, [_fill("6m30s")]),
        _run(2, [throughput, not_run("sanity-fill-cluster"), not_run("reclaim")], status="incomplete"),
        # Incomplete, but this chart's scenario ran: its point is there, and needs no mark.
        _run(3, [_fill("6m40s"), not_run("reclaim")], status="incomplete"),
    ]
    drawn = trend(runs, test_name=FILL, detail="time")
    assert [point.run_id for point in drawn.points] == ["run-01", "run-03"]
    assert [(mark.run_id, mark.text, mark.value) for mark in drawn.not_run] == [
        ("run-02", "not measured: the run is incomplete (sanity-fill-cluster, reclaim did not run)", None)
    ]
    assert drawn.failures == []


def test_threshold_bounds_and_regressions_come_from_the_verdicts() -> None:
    bounded = {"threshold": {"min": None, "max": 420.0, "status": "pass", "reason": "within"}}
    raised = {"threshold": {"min": 300.0, "max": 480.0, "status": "breach", "reason": "breach"}}
    flagged = {
        **raised,
        "change_point": {"reason": "'Fill' / 'time' regressed since run run-03", "p_value": 1e-9},
    }
    runs = [
        _run(1, [_fill("6m30s")]),
        _run(2, [_fill("6m35s")], judged=bounded),
        _run(3, [_fill("8m10s")], judged=raised),
        _run(4, [_fill("8m20s")], judged=flagged),
        _run(5, [_fill("6m30s")]),  # published before thresholds: the last bounds stay
    ]
    drawn = trend(runs, test_name=FILL, detail="time")
    assert (drawn.bound_min, drawn.bound_max) == (300.0, 480.0)
    assert [point.breach for point in drawn.points] == [False, False, True, True, False]
    assert [(mark.run_id, mark.value, mark.text) for mark in drawn.regressions] == [
        ("run-04", 500.0, "'Fill' / 'time' regressed since run run-03")
    ]
    assert drawn.failures == []


def test_a_run_without_its_documents_is_left_out_of_the_chart() -> None:
    unreadable = PublishedRun(row=_row(2), results=None, verdicts=None)
    drawn = trend([_run(1, [_fill("6m30s")]), unreadable], test_name=FILL, detail="time")
    assert [point.run_id for point in drawn.points] == ["run-01"]
    assert drawn.failures == []
