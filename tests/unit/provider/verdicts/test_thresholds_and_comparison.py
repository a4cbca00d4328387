from __future__ import annotations

import pytest

from kai_scale.verdicts.comparison import compare_runs
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
    previous = [{"test_name": "Fill", "status": "success", "details": {"nodes": 500, "time": "6m0s"}}]
    rows = {(r.test_name, r.detail): r for r in compare_runs(current=TESTS, previous=previous)}
    assert set(rows) == {("Fill", "nodes"), ("Fill", "time")}
    assert rows[("Fill", "time")].previous == 360
    assert rows[("Fill", "time")].change_percent == pytest.approx(10.19, abs=0.01)
    assert rows[("Fill", "nodes")].change_percent == 0
