from __future__ import annotations

import random

import pytest

from kai_scale.verdicts.acknowledgements import Acknowledgement, parse_acknowledgements
from kai_scale.verdicts.change_points import Method
from kai_scale.verdicts.comparison import compare_runs
from kai_scale.verdicts.document import verdicts_document
from kai_scale.verdicts.regressions import HistoricRun, find_regressions
from kai_scale.verdicts.thresholds import evaluate_thresholds


def _run(index: int, *, time: float, rate: float, extra: bool = False) -> HistoricRun:
    details: dict[str, object] = {"time": f"{time:.1f}s", "pods per second": rate}
    if extra:
        details["jobs"] = 4000 + index
    return HistoricRun(
        run_id=f"r{index:03d}", tests=[{"test_name": "Fill", "status": "success", "details": details}]
    )


def _history(count: int, *, step_at: int | None, extra: bool = False) -> list[HistoricRun]:
    rng = random.Random(7)
    return [
        _run(
            i,
            time=300 * (1.2 if step_at is not None and i >= step_at else 1) * (1 + rng.uniform(-0.05, 0.05)),
            rate=600 * (1 + rng.uniform(-0.05, 0.05)),
            extra=extra,
        )
        for i in range(count)
    ]


def _regressions(runs: list[HistoricRun], acks: list[Acknowledgement] | None = None) -> list[str]:
    *history, newest = runs
    found = find_regressions(
        run_id=newest.run_id, node_count=500, tests=newest.tests, history=history, acknowledgements=acks or []
    )
    return [f"{f.detail}@{f.since_run_id}" for f in found]


def test_a_slower_time_is_flagged_and_the_steady_rate_is_not() -> None:
    assert _regressions(_history(41, step_at=40)) == ["time@r040"]


def test_adding_a_metric_leaves_the_others_result_unchanged() -> None:
    assert _regressions(_history(41, step_at=40, extra=True)) == _regressions(_history(41, step_at=40))


def test_an_acknowledged_change_is_not_reported_again() -> None:
    runs = _history(43, step_at=40)
    assert _regressions(runs) == ["time@r040"]
    text = (
        '{"acknowledgements": [{"test_name": "Fill", "detail": "time", "node_count": 500, '
        '"run_id": "r040", "by": "kai-dev", "reason": "expected with the new plugin"}]}'
    )
    assert _regressions(runs, parse_acknowledgements(text, key="Public/acknowledgements.json")) == []


def test_an_acknowledgement_file_missing_a_field_names_the_entry() -> None:
    with pytest.raises(ValueError, match=r"acks\.json: acknowledgements\[0\] lacks by, reason"):
        parse_acknowledgements(
            '{"acknowledgements": [{"test_name": "a", "detail": "b", "node_count": 1, "run_id": "x"}]}',
            key="acks.json",
        )


def test_the_document_says_regression_with_one_reason_per_finding() -> None:
    *history, newest = _history(41, step_at=40)
    regressions = find_regressions(run_id=newest.run_id, node_count=500, tests=newest.tests, history=history)
    document = verdicts_document(
        run_id=newest.run_id,
        node_count=500,
        tests=newest.tests,
        thresholds=evaluate_thresholds(
            thresholds=[{"test_name": "Fill", "detail": "time", "max": "10m"}], tests=newest.tests, where="s"
        ),
        regressions=regressions,
        comparison=compare_runs(current=newest.tests, previous=history[-1].tests),
        previous_run_id=history[-1].run_id,
        method=Method(),
    )
    assert document["verdict"] == "regression"
    assert len(document["reasons"]) == 1
    assert "regressed since run r040" in document["reasons"][0]
    time = document["tests"]["Fill"]["time"]
    assert set(time) == {"comparison", "threshold", "change_point"}
    assert document["method"]["window"] == 30
