"""verdicts.json as a model: written as it always was, read back once and refused when it is not one."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kai_scale.alerts.findings import findings
from kai_scale.verdicts.change_points import ChangePoint, Method
from kai_scale.verdicts.comparison import DetailComparison
from kai_scale.verdicts.document import Verdicts, VerdictsError, verdicts_document, with_profiles
from kai_scale.verdicts.profile_comparison import compare_cpu_profiles, cpu_change_sentence
from kai_scale.verdicts.regressions import RegressionFinding
from kai_scale.verdicts.thresholds import ThresholdFinding
from tests.unit.provider.profiles.builder import HEAVY1, HEAVY3, fixture

# verdicts.json exactly as publish_results wrote it before the document was a model (json.dumps of the
# dict, indent 2), from the findings below: a detail compared, bounded and regressed, one only bounded
# (a threshold on nothing), one only compared, a scenario without a previous run.
WRITTEN = Path(__file__).with_name("verdicts_as_written.json").read_text()
FILL = "Fill Cluster with single GPU Jobs"
TESTS = [
    {"test_name": FILL, "status": "success", "details": {"nodes": 500, "time": "490.0s"}},
    {"test_name": "reclaim", "status": "failure", "details": {"scenario": "reclaim", "message": "m"}},
    {
        "test_name": "topology",
        "status": "not_run",
        "details": {"scenario": "topology", "message": "KAI not ready"},
    },
]
THRESHOLDS = [
    ThresholdFinding(
        test_name=FILL,
        detail="time",
        min=None,
        max=420.0,
        value=490.0,
        status="breach",
        reason=f"{FILL!r} / 'time' = 490.0s (490) breaches max 420",
    ),
    ThresholdFinding(
        test_name=FILL,
        detail="jobs",
        min=4000.0,
        max=None,
        value=None,
        status="missing",
        reason=f"threshold on {FILL!r} / 'jobs': the run produced no such detail",
    ),
    ThresholdFinding(
        test_name=FILL,
        detail="nodes",
        min=1.0,
        max=None,
        value=500.0,
        status="pass",
        reason=f"{FILL!r} / 'nodes' = 500 within bounds",
    ),
]
REGRESSIONS = [
    RegressionFinding(
        test_name=FILL,
        detail="time",
        better="lower",
        change=ChangePoint(
            start=30, baseline=395.6834, current=484.6667, change_percent=22.489, p_value=2.5e-07
        ),
        since_run_id="20260030-scheduled",
        reason=f"{FILL!r} / 'time' regressed since run 20260030-scheduled",
    )
]
COMPARISON = [
    DetailComparison(
        test_name=FILL,
        detail="nodes",
        previous=500.0,
        current=500.0,
        change_percent=0.0,
        previous_run_id="20260031-scheduled",
    ),
    DetailComparison(
        test_name=FILL,
        detail="time",
        previous=484.0,
        current=490.0,
        change_percent=1.2396694214876034,
        previous_run_id="20260031-scheduled",
    ),
    DetailComparison(
        test_name="Reclaim",
        detail="time",
        previous=None,
        current=61.0,
        change_percent=None,
        previous_run_id=None,
    ),
]


def _document() -> Verdicts:
    return verdicts_document(
        run_id="20261122T020000Z-scheduled-1a2b3c4d",
        node_count=500,
        tests=TESTS,
        thresholds=THRESHOLDS,
        regressions=REGRESSIONS,
        comparison=COMPARISON,
        previous_run_ids={"sanity-fill-cluster": "20260031-scheduled", "reclaim": None},
        method=Method(),
    )


def test_verdicts_are_written_as_they_always_were_and_read_back_unchanged() -> None:
    """Key for key as before profiles existed, then ``profiles``; a document of before reads back."""
    document = _document()
    written = document.model_dump(mode="json")
    assert written.pop("profiles") == {}, "the last key, none compared"
    assert json.dumps(written, indent=2) + "\n" == WRITTEN
    read = Verdicts.read(json.loads(WRITTEN), source="Public/r/verdicts.json")
    assert read == document
    assert Verdicts.read(document.model_dump(mode="json"), source="XCom verdicts") == document


def test_what_was_not_found_about_a_detail_has_no_key() -> None:
    tests = _document().model_dump(mode="json")["tests"]
    assert list(tests[FILL]["time"]) == ["comparison", "threshold", "change_point"]
    assert list(tests[FILL]["jobs"]) == ["threshold"]
    assert list(tests["Reclaim"]["time"]) == ["comparison"]
    read = Verdicts.read(json.loads(WRITTEN), source="Public/r/verdicts.json")
    assert (read.tests[FILL]["jobs"].comparison, read.tests[FILL]["jobs"].change_point) == (None, None)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda v: v.pop("tests"), "'tests' Field required"),
        (lambda v: v.update(verdict="fine"), "'verdict' Input should be 'pass', 'failure'"),
        (lambda v: v["test_verdicts"].update(reclaim="meh"), "'test_verdicts.reclaim' Input should be"),
        (
            lambda v: v["tests"][FILL]["time"]["change_point"].pop("p_value"),
            f"'tests.{FILL}.time.change_point.p_value'",
        ),
        (lambda v: v["tests"][FILL]["jobs"].update(colour="red"), f"'tests.{FILL}.jobs.colour' Extra inputs"),
        (lambda v: v["method"].update(window="thirty"), "'method.window' Input should be a valid integer"),
        # Written before each scenario was compared with its own previous run: not today's document.
        (lambda v: v.update(previous_run_id=v.pop("previous_run_ids")), "'previous_run_ids' Field required"),
    ],
)
def test_a_malformed_or_truncated_document_is_refused_naming_its_source_and_field(
    change: Callable[[dict[str, Any]], object], field: str
) -> None:
    written = json.loads(WRITTEN)
    change(written)
    with pytest.raises(VerdictsError, match=f"^verdicts Public/r/verdicts.json: .*{re.escape(field)}"):
        Verdicts.read(written, source="Public/r/verdicts.json")


def test_a_flagged_scenario_compared_with_its_previous_run_names_what_grew() -> None:
    """Its test breached a threshold; its CPU profile is cpu_heavy1 against the baseline's cpu_heavy3."""
    comparison = compare_cpu_profiles(run=fixture(HEAVY1), baseline=fixture(HEAVY3), baseline_run_id="r31")
    judged = with_profiles(
        _document(),
        comparisons={"sanity-fill-cluster": comparison, "reclaim": "no previous comparable run"},
        scenario_tests={"sanity-fill-cluster": ["Fill Cluster with single GPU Jobs"], "reclaim": ["Reclaim"]},
    )
    assert judged.test_verdicts["Fill Cluster with single GPU Jobs"] == "threshold"
    fill, reclaim = judged.profiles["sanity-fill-cluster"], judged.profiles["reclaim"]
    assert (fill.flagged, fill.comparison, fill.reason) == (True, comparison, None)
    assert (reclaim.comparison, reclaim.reason) == (None, "no previous comparable run")
    assert judged.reasons == (
        *_document().reasons,
        f"sanity-fill-cluster: KAI's scheduler {cpu_change_sentence(comparison)}",
    )
    assert "grew most: main.light +" in judged.reasons[-1]
    found = findings(summary=None, verdicts=judged)
    (change,) = found.profile_changes
    assert (change.scenario, change.grew[0]) == ("sanity-fill-cluster", "main.light")


def test_a_flagged_scenario_whose_profile_was_not_compared_says_why() -> None:
    judged = with_profiles(
        _document(),
        comparisons={"sanity-fill-cluster": "the baseline run 20260031-scheduled published no CPU profile"},
        scenario_tests={"sanity-fill-cluster": ["Fill Cluster with single GPU Jobs"]},
    )
    assert judged.profiles["sanity-fill-cluster"].flagged
    assert judged.reasons == (
        *_document().reasons,
        "sanity-fill-cluster: KAI's scheduler's CPU profile not compared: "
        "the baseline run 20260031-scheduled published no CPU profile",
    )
    assert findings(summary=None, verdicts=judged).profile_changes == ()


def test_a_scenario_not_flagged_keeps_its_comparison_out_of_the_reasons() -> None:
    comparison = compare_cpu_profiles(run=fixture(HEAVY1), baseline=fixture(HEAVY3), baseline_run_id="r31")
    judged = with_profiles(
        _document(), comparisons={"reclaim": comparison}, scenario_tests={"reclaim": ["Reclaim"]}
    )
    assert not judged.profiles["reclaim"].flagged
    assert judged.reasons == _document().reasons
    assert findings(summary=None, verdicts=judged).profile_changes == ()
