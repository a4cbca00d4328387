"""The run's summary: each selected scenario's outcome, whatever became of its task. Pure.

A run's status: ``failure`` when a scenario failed, ``incomplete`` when none failed but one did not run
(KAI missing or not ready: nothing of it was measured), else ``success``; scenarios not selected
(``skipped``) count for nothing. A failure's kind keeps KAI's failures apart from the pipeline's:
``scenario`` (it ran and what it measures failed) or ``infrastructure`` (it could not run or be
recorded: setup failed, no runner pod, the runner crashed, outputs not uploaded or unreadable).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from kai_scale_model.outcome import FailureKind, OutcomeError, ScenarioOutcome
from kai_scale_model.runner_interface import GINKGO_REPORT, OUTCOME

RunStatus = Literal["success", "failure", "incomplete"]


@dataclass(frozen=True, kw_only=True)
class ScenarioEntry:
    """One scenario in the run summary."""

    scenario: str
    """Scenario name."""
    status: str
    """``success``, ``failure``, ``not_run`` (KAI missing or not ready) or ``skipped`` (not selected)."""
    reason: str | None
    """Why it failed, did not run or was skipped."""
    failure_kind: FailureKind | None
    """For a failure: ``scenario`` or ``infrastructure`` (see the module); None otherwise."""
    try_number: int | None
    """The task try whose outputs these are (None when the scenario never ran)."""
    outcome_key: str | None
    """Object key of the runner's outcome.json."""
    ginkgo_report_key: str | None
    """Object key of the Ginkgo report, when there is one."""
    outcome: dict[str, Any] | None
    """The runner's outcome (outcome.json), when it wrote one."""


def scenario_entry(
    *,
    scenario: str,
    selected: bool,
    outputs: Mapping[str, Any] | None,
    outcome_text: str | None,
    ginkgo_report_exists: bool,
) -> ScenarioEntry:
    """Decide a scenario's entry from what its task recorded and what its runner uploaded."""
    if not selected:
        return ScenarioEntry(
            scenario=scenario,
            status="skipped",
            reason="not selected for this run",
            failure_kind=None,
            try_number=None,
            outcome_key=None,
            ginkgo_report_key=None,
            outcome=None,
        )
    if outputs is None:
        return ScenarioEntry(
            scenario=scenario,
            status="failure",
            reason="the scenario's task did not start a runner pod (see its task log)",
            failure_kind="infrastructure",
            try_number=None,
            outcome_key=None,
            ginkgo_report_key=None,
            outcome=None,
        )
    keys = outputs["keys"]
    common = {
        "scenario": scenario,
        "try_number": outputs["try_number"],
        "outcome_key": keys[OUTCOME],
        "ginkgo_report_key": keys[GINKGO_REPORT] if ginkgo_report_exists else None,
    }
    if outcome_text is None:
        return ScenarioEntry(
            **common,
            status="failure",
            outcome=None,
            reason="the runner pod produced no outcome (it did not start, or was stopped); "
            "see the scenario's task log",
            failure_kind="infrastructure",
        )
    try:
        outcome = ScenarioOutcome.from_json(outcome_text)
    except OutcomeError as error:
        return ScenarioEntry(
            **common, status="failure", reason=str(error), outcome=None, failure_kind="infrastructure"
        )
    return ScenarioEntry(
        **common,
        # A selected scenario is never skipped: an older runner said so when it found no KAI.
        status="not_run" if outcome.status == "skipped" else outcome.status,
        reason=outcome.reason,
        outcome=json.loads(outcome.to_json()),
        # An older runner names no kind: its failures were the scenario's own.
        failure_kind=outcome.failure_kind or ("scenario" if outcome.status == "failure" else None),
    )


def scenarios_with(entries: Sequence[ScenarioEntry], status: str) -> list[str]:
    """The names of the scenarios of ``status``, in the entries' order."""
    return [e.scenario for e in entries if e.status == status]


def run_status(entries: Sequence[ScenarioEntry]) -> RunStatus:
    """``failure``, else ``incomplete``, else ``success`` (see the module)."""
    if scenarios_with(entries, "failure"):
        return "failure"
    return "incomplete" if scenarios_with(entries, "not_run") else "success"


def run_failure_kind(entries: Sequence[ScenarioEntry]) -> FailureKind | None:
    """``scenario`` when a scenario ran and failed, else ``infrastructure`` when one failed; else None."""
    kinds = {e.failure_kind for e in entries if e.status == "failure"}
    if "scenario" in kinds:
        return "scenario"
    return "infrastructure" if kinds else None


def run_summary(
    *,
    run_id: str,
    params: Mapping[str, Any],
    entries: Sequence[ScenarioEntry],
    runner_image: str,
    image_ids: Mapping[str, str | None],
) -> dict[str, Any]:
    """The run summary (``runs/<run-id>/run-summary.json``)."""
    return {
        "run_id": run_id,
        "status": run_status(entries),
        "failure_kind": run_failure_kind(entries),
        "failed_scenarios": scenarios_with(entries, "failure"),
        "not_run_scenarios": scenarios_with(entries, "not_run"),
        "node_count": params.get("node_count"),
        "kai_ref": params.get("kai_ref"),
        "runner_image": runner_image,
        # The digest each runner pod's node resolved the reference to (None: its pod never started).
        "runner_image_ids": dict(image_ids),
        "scenarios": [asdict(e) for e in entries],
    }
