from __future__ import annotations

from typing import Any

import pytest

from kai_scale.verdicts.change_points import DEFAULT_METHOD
from kai_scale.verdicts.comparison import compare_runs
from kai_scale.verdicts.document import overall_verdict, verdicts_by_test, verdicts_document
from kai_scale.verdicts.history import HistoricRun, previous_runs
from kai_scale.verdicts.thresholds import evaluate_thresholds
from kai_scale.verdicts.values import DetailValueError

TESTS = [
    {"test_name": "Fill", "status": "success", "details": {"nodes": 500, "time": "6m36.7s"}},
    {"test_name": "reclaim", "status": "failure", "details": {"message": "boom"}},
]


def test_a_duration_detail_is_compared_with_a_duration_bound() -> None:
    (finding,) = evaluate_thresholds(
        thresholds=[{"test_name": "Fill", "detail": "time", "max": "6m"}], tests=TESTS, where="s.yaml"
    )
    assert finding.status == "breach"
    assert finding.value == pytest.approx(396.7)
    assert finding.max == 360
    assert "max 360" in finding.reason


def test_a_value_within_bounds_passes() -> None:
    (finding,) = evaluate_thresholds(
        thresholds=[{"test_name": "Fill", "detail": "time", "max": 900, "min": "1m"}], tests=TESTS, where="s"
    )
    assert finding.status == "pass"


@pytest.mark.parametrize(
    ("test_name", "detail", "what"), [("Nope", "time", "test"), ("Fill", "jobs", "detail")]
)
def test_a_threshold_on_what_the_run_did_not_produce_is_reported(
    test_name: str, detail: str, what: str
) -> None:
    (finding,) = evaluate_thresholds(
        thresholds=[{"test_name": test_name, "detail": detail, "max": 1}], tests=TESTS, where="s"
    )
    assert finding.status == "missing"
    assert f"no such {what}" in finding.reason


def test_a_bound_that_is_no_number_names_where_it_is() -> None:
    with pytest.raises(DetailValueError, match=r"s\.yaml: thresholds\[0\]\.max: must be a number"):
        evaluate_thresholds(
            thresholds=[{"test_name": "Fill", "detail": "time", "max": "soon"}], tests=TESTS, where="s.yaml"
        )


def test_comparison_gives_previous_current_and_change() -> None:
    previous = HistoricRun(
        run_id="r1",
        tests=[{"test_name": "Fill", "status": "success", "details": {"nodes": 500, "time": "6m0s"}}],
    )
    rows = {(r.test_name, r.detail): r for r in compare_runs(current=TESTS, previous=previous)}
    assert set(rows) == {("Fill", "nodes"), ("Fill", "time")}
    assert rows[("Fill", "time")].previous == 360
    assert rows[("Fill", "time")].change_percent == pytest.approx(10.19, abs=0.01)
    assert rows[("Fill", "time")].previous_run_id == "r1"
    assert rows[("Fill", "nodes")].change_percent == 0


def test_without_a_previous_run_a_detail_has_no_previous_value() -> None:
    (row,) = [r for r in compare_runs(current=TESTS, previous=None) if r.detail == "time"]
    assert (row.previous, row.change_percent, row.previous_run_id) == (None, None, None)


def _test(name: str, seconds: float) -> dict[str, Any]:
    return {"test_name": name, "status": "success", "details": {"time": f"{seconds}s"}}


def _failed(scenario: str, status: str = "failure") -> dict[str, Any]:
    """The entry results.json has for a scenario that failed, did not run or was skipped."""
    return {"test_name": scenario, "status": status, "details": {"scenario": scenario, "message": "boom"}}


def test_each_scenario_is_compared_with_the_newest_run_it_produced_results_in() -> None:
    earlier = [
        HistoricRun(run_id="r1", tests=[_test("Fill", 100), _test("Reclaim", 50)]),
        # Before the reclaim scenario existed.
        HistoricRun(run_id="r2", tests=[_test("Fill", 101)]),
        # Reclaim not selected; fill's suite wrote its test and then the scenario failed.
        HistoricRun(run_id="r3", tests=[_test("Fill", 102), _failed("fill"), _failed("reclaim", "skipped")]),
        # Fill failed before its suite wrote anything; reclaim passed.
        HistoricRun(run_id="r4", tests=[_failed("fill"), _test("Reclaim", 53)]),
        # KAI was not ready: neither ran.
        HistoricRun(run_id="r5", tests=[_failed("fill", "not_run"), _failed("reclaim", "not_run")]),
    ]
    tonight = {
        "fill": [_test("Fill", 110)],
        "reclaim": [_test("Reclaim", 55)],
        "topology": [_test("Topo", 9)],
    }

    previous = previous_runs(tonight, earlier=earlier)

    assert {scenario: run.run_id if run else None for scenario, run in previous.items()} == {
        "fill": "r2",
        "reclaim": "r4",
        "topology": None,
    }


def test_a_breach_makes_that_tests_verdict_threshold() -> None:
    findings = evaluate_thresholds(
        thresholds=[{"test_name": "Fill", "detail": "time", "max": "6m"}], tests=TESTS, where="s.yaml"
    )
    assert verdicts_by_test(tests=TESTS, thresholds=findings, regressions=[]) == {
        "Fill": "threshold",
        "reclaim": "failure",
    }


def test_a_scenario_that_did_not_run_is_incomplete_and_no_kai_failure_or_regression() -> None:
    tests = [TESTS[0], _failed("topology", "not_run")]
    document = verdicts_document(
        run_id="r",
        node_count=500,
        tests=tests,
        thresholds=[],
        regressions=[],
        comparison=[],
        previous_run_ids={},
        method=DEFAULT_METHOD,
    )
    assert document.verdict == "incomplete"
    assert document.test_verdicts == {"Fill": "pass", "topology": "incomplete"}
    assert (document.reasons, document.findings) == (("'topology' did not run",), ())
    with_failure = [*tests, TESTS[1]]
    assert overall_verdict(tests=with_failure, thresholds=[], regressions=[]) == "failure"
    assert overall_verdict(tests=[TESTS[0]], thresholds=[], regressions=[]) == "pass"
