from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kai_scale.publishing.run_summary import (
    RunSummary,
    RunSummaryError,
    ScenarioEntry,
    run_failure_kind,
    run_status,
    run_summary,
    scenario_entry,
)
from kai_scale_model.outcome import FailureKind, OutcomeError, ScenarioOutcome, Status
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
    assert entry.outcome.tests[0].test_name == "Reclaim 4000 single GPU Jobs"


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
    statuses_and_kinds: list[tuple[Status, FailureKind | None]], status: str, failure_kind: str | None
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
    assert (summary.status, summary.failed_scenarios, summary.runner_image) == ("failure", ("b",), "img:t")
    assert (summary.failure_kind, summary.not_run_scenarios) == ("infrastructure", ())
    assert summary.runner_image_ids == {"b": None}
    again = run_summary(run_id="r", params=params, entries=[ok], runner_image="img:t", image_ids=image_ids)
    assert again.status == "success"


# A run summary exactly as publish_results wrote it before the summary was a model (json.dumps of the
# dict, indent 2): a failed scenario with its outcome, one that never started, one not selected.
WRITTEN = Path(__file__).with_name("run_summary_as_written.json").read_text()
WRITTEN_OUTCOME = replace(
    OUTCOME,
    status="failure",
    tests=(
        SuiteEntry(
            test_name="Reclaim 4000 single GPU Jobs",
            status="failure",
            details={"time": "1m2s", "pods": 4000, "rate": 12.5, "ok": True, "note": None},
        ),
    ),
    kai_commit_hash="abc123",
    failure_kind="scenario",
)


def test_a_summary_is_written_as_it_always_was_and_reads_back_unchanged() -> None:
    entries = [
        scenario_entry(
            scenario="reclaim",
            selected=True,
            outputs=OUTPUTS,
            outcome_text=WRITTEN_OUTCOME.to_json(),
            ginkgo_report_exists=True,
        ),
        scenario_entry(
            scenario="fill", selected=True, outputs=None, outcome_text=None, ginkgo_report_exists=False
        ),
        scenario_entry(
            scenario="topology", selected=False, outputs=None, outcome_text=None, ginkgo_report_exists=False
        ),
    ]
    summary = run_summary(
        run_id="20261122T020000Z-scheduled-1a2b3c4d",
        params={"node_count": 500, "kai_ref": "v0.9.0"},
        entries=entries,
        runner_image="ghcr.io/x/runner:main",
        image_ids={"reclaim": "sha256:0f", "fill": None},
    ).judged(verdict="failure", reasons=["'reclaim' failed"])
    assert json.dumps(summary.model_dump(mode="json"), indent=2) + "\n" == WRITTEN
    read = RunSummary.read(json.loads(WRITTEN), source="runs/r/run-summary.json")
    assert read == summary
    assert json.dumps(read.model_dump(mode="json"), indent=2) + "\n" == WRITTEN
    assert read.scenarios[0].outcome == WRITTEN_OUTCOME


def test_a_summary_not_yet_judged_has_no_verdict_keys() -> None:
    written = json.loads(WRITTEN)
    unjudged = {key: value for key, value in written.items() if key not in ("verdict", "verdict_reasons")}
    summary = RunSummary.read(unjudged, source="runs/r/run-summary.json")
    assert (summary.verdict, summary.verdict_reasons) == (None, None)
    assert summary.model_dump(mode="json") == unjudged
    assert list(
        summary.judged(verdict="failure", reasons=["'reclaim' failed"]).model_dump(mode="json")
    ) == list(written)


def test_nan_in_a_suites_detail_is_written_as_json_dumps_writes_it() -> None:
    outcome = replace(
        OUTCOME, tests=(SuiteEntry(test_name="t", status="success", details={"rate": math.nan}),)
    )
    entry = scenario_entry(
        scenario="reclaim",
        selected=True,
        outputs=OUTPUTS,
        outcome_text=outcome.to_json(),
        ginkgo_report_exists=False,
    )
    summary = run_summary(run_id="r", params={}, entries=[entry], runner_image="img:t", image_ids={})
    assert '"details": {"rate": NaN}' in json.dumps(summary.model_dump(mode="json"))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda s: s.pop("run_id"), "'run_id' Field required"),
        (lambda s: s.update(status="meh"), "'status' Input should be 'success', 'failure' or 'incomplete'"),
        (lambda s: s["scenarios"][1].pop("outcome"), "'scenarios.1.outcome' Field required"),
        (lambda s: s["scenarios"][0]["outcome"].update(status="meh"), "'scenarios.0.outcome.status' Input"),
        (
            lambda s: s["scenarios"][2].update(colour="red"),
            "'scenarios.2.colour' Extra inputs are not permitted",
        ),
        (lambda s: s.update(scenarios=[s["scenarios"][0], {"scenario": "fill"}]), "'scenarios.1.status'"),
    ],
)
def test_a_malformed_or_truncated_summary_is_refused_naming_its_source_and_field(
    change: Callable[[dict[str, Any]], object], field: str
) -> None:
    written = json.loads(WRITTEN)
    change(written)
    with pytest.raises(RunSummaryError, match=f"^run summary runs/r/run-summary.json: .*{re.escape(field)}"):
        RunSummary.read(written, source="runs/r/run-summary.json")


def test_a_summary_that_is_no_object_is_refused() -> None:
    with pytest.raises(
        RunSummaryError, match=r"^run summary x: '\(top level\)' Input should be a valid dict"
    ):
        RunSummary.read(["r"], source="x")


def test_the_summary_and_the_alert_import_no_change_point_analysis() -> None:
    """Every parse of the DAG file and every alert imports them: Otava and SciPy cost ~0.5 s.

    The run summary and the alert's findings name the verdicts document's types (verdicts.document).
    """
    code = (
        "import sys, kai_scale.publishing.run_summary, kai_scale.alerts.message;"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'otava', 'scipy'}))"
    )
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "[]"
