"""The run's summary: each selected scenario's outcome, whatever became of its task. Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kai_scale_model.outcome import OutcomeError, ScenarioOutcome
from kai_scale_model.runner_interface import GINKGO_REPORT, OUTCOME


@dataclass(frozen=True, kw_only=True)
class ScenarioEntry:
    """One scenario in the run summary."""

    scenario: str
    """Scenario name."""
    status: str
    """``success``, ``failure`` or ``skipped``."""
    reason: str | None
    """Why it failed or was skipped."""
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
        )
    try:
        outcome = ScenarioOutcome.from_json(outcome_text)
    except OutcomeError as error:
        return ScenarioEntry(**common, status="failure", reason=str(error), outcome=None)
    return ScenarioEntry(
        **common, status=outcome.status, reason=outcome.reason, outcome=json.loads(outcome.to_json())
    )


def run_summary(
    *,
    run_id: str,
    params: Mapping[str, Any],
    entries: Sequence[ScenarioEntry],
    runner_image: str,
    image_ids: Mapping[str, str | None],
) -> dict[str, Any]:
    """The run summary (``runs/<run-id>/run-summary.json``)."""
    failed = [e.scenario for e in entries if e.status == "failure"]
    return {
        "run_id": run_id,
        "status": "failure" if failed else "success",
        "failed_scenarios": failed,
        "node_count": params.get("node_count"),
        "kai_ref": params.get("kai_ref"),
        "runner_image": runner_image,
        # The digest each runner pod's node resolved the reference to (None: its pod never started).
        "runner_image_ids": dict(image_ids),
        "scenarios": [asdict(e) for e in entries],
    }
