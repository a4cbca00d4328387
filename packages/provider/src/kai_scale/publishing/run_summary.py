"""The run's summary: each selected scenario's outcome, whatever became of its task. Pure.

A run's status: ``failure`` when a scenario failed, ``incomplete`` when none failed but one did not run
(KAI missing or not ready: nothing of it was measured), else ``success``; scenarios not selected
(``skipped``) count for nothing. A failure's kind keeps KAI's failures apart from the pipeline's:
``scenario`` (it ran and what it measures failed) or ``infrastructure`` (it could not run or be
recorded: setup failed, no runner pod, the runner crashed, outputs not uploaded or unreadable).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import SerializerFunctionWrapHandler, model_serializer

from kai_scale.verdicts.document import Verdict
from kai_scale_model.outcome import FailureKind, OutcomeError, ScenarioOutcome, Status
from kai_scale_model.runner_interface import GINKGO_REPORT, OUTCOME
from kai_scale_model.validation import JsonDocument, validated

RunStatus = Literal["success", "failure", "incomplete"]


class RunSummaryError(ValueError):
    """A run summary that is not one (malformed or truncated); the message names its source and field."""


class ScenarioEntry(JsonDocument):
    """One scenario in the run summary."""

    scenario: str
    """Scenario name."""
    status: Status
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
    outcome: ScenarioOutcome | None
    """The runner's outcome (outcome.json, as written), when it wrote one."""


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
        outcome=outcome,
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


class RunSummary(JsonDocument):
    """The run summary (``runs/<run-id>/run-summary.json``, and ``publish_results``' XCom ``run_summary``).

    Its keys, their order and their values are what the trend view, the alert and operators read:
    ``model_dump(mode="json")`` writes them, ``read`` reads them back.
    """

    run_id: str
    status: RunStatus
    """``success``, ``failure`` or ``incomplete`` (see the module)."""
    failure_kind: FailureKind | None
    """For a failed run: ``scenario`` when a scenario ran and failed, else ``infrastructure``."""
    failed_scenarios: tuple[str, ...]
    not_run_scenarios: tuple[str, ...]
    node_count: int | None
    """The run's ``node_count`` param."""
    kai_ref: str | None
    """The run's ``kai_ref`` param."""
    runner_image: str
    runner_image_ids: dict[str, str | None]
    """The digest each runner pod's node resolved the reference to (None: its pod never started)."""
    scenarios: tuple[ScenarioEntry, ...]
    verdict: Verdict | None = None
    """The run's verdict (``verdicts.json``); None, and no key, until the run is judged."""
    verdict_reasons: tuple[str, ...] | None = None
    """The verdict's reasons; None, and no key, until the run is judged."""

    @model_serializer(mode="wrap")
    def _unjudged_without_verdict_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A summary gains verdict and verdict_reasons when its run is judged; before, it has neither key.
        written: dict[str, Any] = handler(self)
        if self.verdict is None and self.verdict_reasons is None:
            written.pop("verdict", None)
            written.pop("verdict_reasons", None)
        return written

    def judged(self, *, verdict: Verdict, reasons: Sequence[str]) -> RunSummary:
        """The summary with its run's verdict and the verdict's reasons."""
        return self.model_copy(update={"verdict": verdict, "verdict_reasons": tuple(reasons)})

    @classmethod
    def read(cls, document: object, *, source: str) -> RunSummary:
        """``document`` (parsed JSON) validated; RunSummaryError names ``source`` and each bad field."""
        return validated(cls, document, what=f"run summary {source}", error=RunSummaryError)


def run_summary(
    *,
    run_id: str,
    params: Mapping[str, Any],
    entries: Sequence[ScenarioEntry],
    runner_image: str,
    image_ids: Mapping[str, str | None],
) -> RunSummary:
    """The run summary of ``entries``, not yet judged (``RunSummary.judged`` adds the verdict)."""
    return RunSummary(
        run_id=run_id,
        status=run_status(entries),
        failure_kind=run_failure_kind(entries),
        failed_scenarios=tuple(scenarios_with(entries, "failure")),
        not_run_scenarios=tuple(scenarios_with(entries, "not_run")),
        node_count=params.get("node_count"),
        kai_ref=params.get("kai_ref"),
        runner_image=runner_image,
        runner_image_ids=dict(image_ids),
        scenarios=tuple(entries),
    )
