from __future__ import annotations

import random
from typing import Any

import pytest

from kai_scale.verdicts.acknowledgements import Acknowledgement, parse_acknowledgements
from kai_scale.verdicts.change_points import DEFAULT_METHOD, Method
from kai_scale.verdicts.comparison import compare_runs
from kai_scale.verdicts.directions import DetailRule
from kai_scale.verdicts.document import verdicts_document
from kai_scale.verdicts.history import HistoricRun
from kai_scale.verdicts.regressions import find_regressions
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


def _regressions(
    runs: list[HistoricRun], acks: list[Acknowledgement] | None = None, method: Method = DEFAULT_METHOD
) -> list[str]:
    *history, newest = runs
    found = find_regressions(
        run_id=newest.run_id,
        node_count=500,
        tests=newest.tests,
        history=history,
        acknowledgements=acks or [],
        method=method,
    )
    return [f"{f.detail}@{f.since_run_id}" for f in found]


def _nightly(runs: list[HistoricRun], nights: range, **options: Any) -> dict[int, list[str]]:
    """Each night's findings, judged as the pipeline does: that night's run against the ones before."""
    return {night: _regressions(runs[: night + 1], **options) for night in nights}


def _acknowledged(run_id: str) -> list[Acknowledgement]:
    return [
        Acknowledgement(
            test_name="Fill", detail="time", node_count=500, run_id=run_id, by="kai-dev", reason="expected"
        )
    ]


def _steps(seed: int, *, at: tuple[int, ...], count: int = 60) -> list[HistoricRun]:
    """``count`` nights of ±5 % noise; the time is 20 % slower from each night in ``at`` on."""
    rng = random.Random(seed)
    return [
        _run(i, time=300 * 1.2 ** sum(i >= step for step in at) * (1 + rng.uniform(-0.05, 0.05)), rate=600)
        for i in range(count)
    ]


def test_a_slower_time_is_flagged_and_the_steady_rate_is_not() -> None:
    assert _regressions(_history(41, step_at=40)) == ["time@r040"]


def test_adding_a_metric_leaves_the_others_result_unchanged() -> None:
    assert _regressions(_history(41, step_at=40, extra=True)) == _regressions(_history(41, step_at=40))


def test_a_detail_left_unjudged_is_never_flagged() -> None:
    """A setting (here the time, as if it were one) changed on purpose is no regression."""
    *history, newest = _history(41, step_at=40)
    found = find_regressions(
        run_id=newest.run_id,
        node_count=500,
        tests=newest.tests,
        history=history,
        rules={("Fill", "time"): DetailRule(better="lower", judge=False)},
    )
    assert found == []


def test_an_acknowledged_change_is_not_reported_again() -> None:
    runs = _history(43, step_at=40)
    assert _regressions(runs) == ["time@r040"]
    text = (
        '{"acknowledgements": [{"test_name": "Fill", "detail": "time", "node_count": 500, '
        '"run_id": "r040", "by": "kai-dev", "reason": "expected with the new plugin"}]}'
    )
    assert _regressions(runs, parse_acknowledgements(text, key="Public/acknowledgements.json")) == []


@pytest.mark.parametrize("seed", range(10))
def test_an_acknowledged_step_is_not_reported_in_any_later_run(seed: int) -> None:
    runs = _steps(seed, at=(40,))
    reported = _nightly(runs, range(40, 43))
    assert any(found == ["time@r040"] for found in reported.values()), reported
    assert _nightly(runs, range(40, 60), acks=_acknowledged("r040")) == {night: [] for night in range(40, 60)}


@pytest.mark.parametrize("gap", [3, 4, 5])
@pytest.mark.parametrize("seed", range(10))
def test_a_new_step_soon_after_an_acknowledged_one_is_flagged_within_3_runs(seed: int, gap: int) -> None:
    """The history before the acknowledgement is kept: a new step needs no 10 runs of a new baseline."""
    second = 40 + gap
    found = _nightly(_steps(seed, at=(40, second)), range(40, second + 3), acks=_acknowledged("r040"))
    assert all(found[night] == [] for night in range(40, second)), found
    assert any(found[night] == [f"time@r{second:03d}"] for night in range(second, second + 3)), found


def test_an_acknowledged_change_that_later_runs_place_a_run_later_is_still_the_acknowledged_one() -> None:
    """Night 40 is half-way (+12 %), the nights after at +22 %: the change starts at 40, later at 41."""
    rng = random.Random(3)
    runs = [_run(i, time=300 * (1 + rng.uniform(-0.05, 0.05)), rate=600) for i in range(40)]
    runs += [_run(40 + i, time=time, rate=600) for i, time in enumerate([336, 363, 366, 369, 366, 363])]
    assert _regressions(runs[:41]) == ["time@r040"]
    acks = _acknowledged("r040")
    assert _nightly(runs, range(40, 46), acks=acks) == {night: [] for night in range(40, 46)}
    untolerant = _nightly(runs, range(40, 46), acks=acks, method=Method(ack_tolerance=0))
    assert ["time@r041"] in untolerant.values(), "the tolerance is what keeps it from being reported"


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
        comparison=compare_runs(current=newest.tests, previous=history[-1]),
        previous_run_ids={"fill": history[-1].run_id},
        method=Method(),
    )
    assert document.verdict == "regression"
    (reason,) = document.reasons
    assert "regressed since run r040" in reason
    assert document.findings == (reason,), "what fails the run besides its failed tests"
    assert document.test_verdicts == {"Fill": "regression"}
    time = document.model_dump(mode="json")["tests"]["Fill"]["time"]
    assert set(time) == {"comparison", "threshold", "change_point"}
    assert document.method.window == 30
