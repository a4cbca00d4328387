from __future__ import annotations

from kai_scale.verdicts.calibration import propose_thresholds
from kai_scale.verdicts.directions import DetailRule


def _tests(time: str, rate: float) -> list[dict[str, object]]:
    return [{"test_name": "Fill", "status": "success", "details": {"time": time, "pods per second": rate}}]


def test_bounds_are_the_median_plus_a_margin_in_the_bad_direction() -> None:
    # The oldest run is left out: only the last 3 count.
    runs = [_tests("10m", 1), _tests("100s", 500), _tests("1m50s", 400), _tests("2m0s", 600)]
    proposals = propose_thresholds(runs, last=3, margin=0.1)
    assert proposals == [
        {"test_name": "Fill", "detail": "pods per second", "min": 450.0, "runs": 3},
        {"test_name": "Fill", "detail": "time", "max": 121.0, "runs": 3},
    ]


def test_a_detail_left_unjudged_gets_no_bound() -> None:
    rules = {("Fill", "pods per second"): DetailRule(better="higher", judge=False)}
    proposals = propose_thresholds([_tests("100s", 500)], last=1, margin=0.1, rules=rules)
    assert [p["detail"] for p in proposals] == ["time"]
