from __future__ import annotations

import json
from dataclasses import replace

import pytest

from kai_scale.publishing.run_summary import (
    ScenarioEntry,
    run_failure_kind,
    run_status,
    run_summary,
    scenario_entry,
)
from kai_scale_model.outcome import FailureKind, OutcomeError, ScenarioOutcome
from kai_scale_model.outcome import TestResult as SuiteEntry  # pytest would collect a class named Test*

OUTCOME = ScenarioOutcome(
    scenario="reclaim",
    kind="ginkgo",
    status="failure",
    reason="spec failed",
    started_at="2026-11-22T02:00:00Z",
    finished_at="2026-11-22T02:10:00Z",
    exit_code=1,
    tests=(SuiteEntry(test_name="Reclaim 4000 single GPU Jobs", status="success", details={"time": "1m2s"}),),
)
OUTPUTS = {
    "try_number": 2,
    "keys": {
        "outcome": "runs/r/scenarios/reclaim/try-2/outcome.json",
        "ginkgo-report": "runs/r/scenarios/reclaim/try-2/ginkgo-report.json",
    },
}


def test_outcome_round_trips() -> None:
    assert ScenarioOutcome.from_json(OUTCOME.to_json()) == OUTCOME
    failed = replace(OUTCOME, failure_kind="scenario")
    assert ScenarioOutcome.from_json(failed.to_json()) == failed
    not_run = replace(OUTCOME, status="not_run", reason="KAI not installed", exit_code=None, tests=())
    assert ScenarioOutcome.from_json(not_run.to_json()) == not_run


def test_an_outcome_of_an_older_runner_has_no_failure_kind() -> None:
    written = json.loads(OUTCOME.to_json())
    del written["failure_kind"]
    assert ScenarioOutcome.from_json(json.dumps(written)).failure_kind is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"scenario": "x"', "not valid JSON"),
        ("[1]", "must be a JSON object"),
        ('{"scenario": "x"}', "does not have the runner's fields"),
        (OUTCOME.to_json().replace('"failure"', '"meh"'), "status must be one of"),
        (
            OUTCOME.to_json().replace('"failure_kind": null', '"failure_kind": "kai"'),
            r"failure_kind must be one of \('scenario', 'infrastructure'\) or null, got 'kai'",
        ),
    ],
)
def test_bad_result_documents(text: str, message: str) -> None:
    with pytest.raises(OutcomeError, match=message):
        ScenarioOutcome.from_json(text)


def test_entry_from_the_runner_result() -> None:
    entry = scenario_entry(
        scenario="reclaim",
        selected=True,
        outputs=OUTPUTS,
        outcome_text=OUTCOME.to_json(),
        ginkgo_report_exists=True,
    )
    assert (entry.status, entry.reason, entry.try_number) == ("failure", "spec failed", 2)
    assert entry.failure_kind == "scenario", "an older runner's failure (no kind) was the scenario's own"
    assert entry.ginkgo_report_key == "runs/r/scenarios/reclaim/try-2/ginkgo-report.json"
    assert entry.outcome is not None
    assert entry.outcome["tests"][0]["test_name"] == "Reclaim 4000 single GPU Jobs"


def test_entries_when_the_runner_left_nothing_or_garbage() -> None:
    not_selected = scenario_entry(
        scenario="a", selected=False, outputs=None, outcome_text=None, ginkgo_report_exists=False
    )
    assert (not_selected.status, not_selected.reason) == ("skipped", "not selected for this run")
    assert not_selected.failure_kind is None
    never_started = scenario_entry(
        scenario="a", selected=True, outputs=None, outcome_text=None, ginkgo_report_exists=False
    )
    assert (never_started.status, never_started.failure_kind) == ("failure", "infrastructure")
    assert "did not start a runner pod" in (never_started.reason or "")
    no_result = scenario_entry(
        scenario="a", selected=True, outputs=OUTPUTS, outcome_text=None, ginkgo_report_exists=False
    )
    assert "produced no outcome" in (no_result.reason or "")
    assert no_result.ginkgo_report_key is None
    assert no_result.failure_kind == "infrastructure", "no upload, or no pod: not KAI's failure"
    truncated = scenario_entry(
        scenario="a", selected=True, outputs=OUTPUTS, outcome_text="{", ginkgo_report_exists=False
    )
    assert "truncated" in (truncated.reason or "")
    assert truncated.failure_kind == "infrastructure"


def _from_runner(outcome: ScenarioOutcome) -> ScenarioEntry:
    return scenario_entry(
        scenario=outcome.scenario,
        selected=True,
        outputs=OUTPUTS,
        outcome_text=outcome.to_json(),
        ginkgo_report_exists=False,
    )


def test_entries_keep_the_runners_status_and_failure_kind() -> None:
    not_run = _from_runner(replace(OUTCOME, status="not_run", reason="KAI not ready: ...", tests=()))
    assert (not_run.status, not_run.reason, not_run.failure_kind) == ("not_run", "KAI not ready: ...", None)
    crashed = _from_runner(replace(OUTCOME, reason="the runner crashed: ...", failure_kind="infrastructure"))
    assert (crashed.status, crashed.failure_kind) == ("failure", "infrastructure")
    passed = _from_runner(replace(OUTCOME, status="success", reason=None))
    assert passed.failure_kind is None
    older = _from_runner(replace(OUTCOME, status="skipped", reason="KAI not installed: CRD ...", tests=()))
    assert (older.status, older.reason) == ("not_run", "KAI not installed: CRD ..."), (
        "an older runner's skip of a selected scenario: KAI was missing"
    )


@pytest.mark.parametrize(
    ("statuses_and_kinds", "status", "failure_kind"),
    [
        ([("success", None), ("skipped", None)], "success", None),
        ([("success", None), ("not_run", None)], "incomplete", None),
        ([("not_run", None), ("failure", "infrastructure")], "failure", "infrastructure"),
        ([("failure", "infrastructure"), ("failure", "scenario")], "failure", "scenario"),
    ],
)
def test_the_runs_status_and_whose_failure_it_was(
    statuses_and_kinds: list[tuple[str, FailureKind | None]], status: str, failure_kind: str | None
) -> None:
    entries = [
        ScenarioEntry(
            scenario=f"s{index}",
            status=entry_status,
            reason=None,
            failure_kind=kind,
            try_number=1,
            outcome_key=None,
            ginkgo_report_key=None,
            outcome=None,
        )
        for index, (entry_status, kind) in enumerate(statuses_and_kinds)
    ]
    assert (run_status(entries), run_failure_kind(entries)) == (status, failure_kind)


def test_summary_fails_when_any_scenario_failed() -> None:
    ok = scenario_entry(
        scenario="a", selected=False, outputs=None, outcome_text=None, ginkgo_report_exists=False
    )
    bad = scenario_entry(
        scenario="b", selected=True, outputs=None, outcome_text=None, ginkgo_report_exists=False
    )
    params = {"node_count": 5, "kai_ref": "main", "runner_tag": "t"}
    image_ids: dict[str, str | None] = {"b": None}
    summary = run_summary(
        run_id="r", params=params, entries=[ok, bad], runner_image="img:t", image_ids=image_ids
    )
    assert (summary["status"], summary["failed_scenarios"], summary["runner_image"]) == (
        "failure",
        ["b"],
        "img:t",
    )
    assert (summary["failure_kind"], summary["not_run_scenarios"]) == ("infrastructure", [])
    assert summary["runner_image_ids"] == {"b": None}
    again = run_summary(run_id="r", params=params, entries=[ok], runner_image="img:t", image_ids=image_ids)
    assert again["status"] == "success"
