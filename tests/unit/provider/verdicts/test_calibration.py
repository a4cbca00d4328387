from __future__ import annotations

from kai_scale.verdicts.calibration import propose_thresholds


def _tests(time: str, rate: float) -> list[dict[str, object]]:
    return [{"test_name": "Fill", "status": "success", "details": {"time": time, "pods per second": rate}}]


def test_bounds_are_the_median_plus_a_margin_in_the_bad_direction() -> None:
    runs = [_tests("100s", 500), _tests("1m50s", 400), _tests("2m0s", 600), _tests("10m", 1)]
    proposals = propose_thresholds(runs[:3], last=3, margin=0.1)
    assert proposals == [
        {"test_name": "Fill", "detail": "pods per second", "min": 450.0, "runs": 3},
        {"test_name": "Fill", "detail": "time", "max": 121.0, "runs": 3},
    ]
