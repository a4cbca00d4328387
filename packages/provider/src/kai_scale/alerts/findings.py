"""What an alert reports, picked out of the run summary and the verdicts document. Pure.

The run summary (``runs/<run-id>/run-summary.json``) names the failed scenarios and those that did not
run; the verdicts document
(``Public/<run-id>/verdicts.json``) holds, per test and detail, the threshold finding, the change
point and the comparison with the previous run, and per scenario its CPU profile of KAI's scheduler
against that run's. Values of duration details are in seconds, as the verdicts document keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_scale.publishing.run_summary import RunSummary, ScenarioEntry
from kai_scale.verdicts.document import Verdict, Verdicts
from kai_scale.verdicts.profile_comparison import cpu_change_sentence
from kai_scale_model.outcome import FailureKind


@dataclass(frozen=True, kw_only=True)
class FailedScenario:
    """A scenario of the run that failed."""

    scenario: str
    """Its name."""
    reason: str
    """Why, as the run summary says."""
    failure_kind: FailureKind | None
    """``scenario`` (it ran and failed) or ``infrastructure`` (it could not run or be recorded)."""


@dataclass(frozen=True, kw_only=True)
class NotRunScenario:
    """A selected scenario of the run that did not run: KAI was missing or not ready."""

    scenario: str
    """Its name."""
    reason: str
    """Why, as the run summary says."""


@dataclass(frozen=True, kw_only=True)
class ThresholdBreach:
    """A detail outside its scenario's threshold, or a threshold on a detail the run did not produce."""

    test_name: str
    """The test entry."""
    detail: str
    """The detail."""
    value: float | None
    """The run's value; None when the run did not produce it."""
    min: float | None
    """The lower bound, if any."""
    max: float | None
    """The upper bound, if any."""
    previous: float | None
    """The previous comparable run's value, if it had one."""
    reason: str
    """The verdict's one line."""


@dataclass(frozen=True, kw_only=True)
class Regression:
    """A detail whose newest values start a significant change in the bad direction."""

    test_name: str
    """The test entry."""
    detail: str
    """The detail."""
    before: float
    """Mean before the change."""
    after: float
    """Mean since the change."""
    change_percent: float
    """(after - before) / before in percent."""
    better: str
    """``lower`` or ``higher``."""
    p_value: float
    """How likely noise alone gives the change."""
    since_run_id: str
    """The run that started it (what an acknowledgement names)."""


@dataclass(frozen=True, kw_only=True)
class ProfileChange:
    """Where KAI's scheduler spent its CPU differently in a flagged scenario than in its previous run."""

    scenario: str
    """The scenario, flagged by a threshold or a regression of one of its tests."""
    change: str
    """``cpu_change_sentence``: the CPU's change and the functions whose share grew most."""
    grew: tuple[str, ...]
    """Those functions, largest growth first."""


@dataclass(frozen=True, kw_only=True)
class Findings:
    """Everything in a run's summary and verdicts that an alert reports."""

    verdict: Verdict | None
    """The run's verdict (``pass``, ``failure``, ``threshold``, ``regression``, ``incomplete``)."""
    failed_scenarios: tuple[FailedScenario, ...]
    """Scenarios that failed, with their reasons."""
    not_run_scenarios: tuple[NotRunScenario, ...]
    """Scenarios that did not run, with their reasons."""
    breaches: tuple[ThresholdBreach, ...]
    """Details outside their thresholds."""
    thresholds_on_nothing: tuple[ThresholdBreach, ...]
    """Thresholds on a test or detail the run did not produce."""
    regressions: tuple[Regression, ...]
    """Regressions against the run's history."""
    profile_changes: tuple[ProfileChange, ...]
    """Per flagged scenario whose CPU profile was compared, what grew."""


def _reason(entry: ScenarioEntry) -> str:
    return entry.reason or "no reason given"


def findings(*, summary: RunSummary | None, verdicts: Verdicts | None) -> Findings:
    """The findings of a run; empty where publishing left no summary or verdicts."""
    entries = summary.scenarios if summary else ()
    failed = tuple(
        FailedScenario(scenario=entry.scenario, reason=_reason(entry), failure_kind=entry.failure_kind)
        for entry in entries
        if entry.status == "failure"
    )
    not_run = tuple(
        NotRunScenario(scenario=entry.scenario, reason=_reason(entry))
        for entry in entries
        if entry.status == "not_run"
    )
    breaches: list[ThresholdBreach] = []
    on_nothing: list[ThresholdBreach] = []
    regressions: list[Regression] = []
    for test_name, details in (verdicts.tests if verdicts else {}).items():
        for detail, judged in details.items():
            previous = judged.comparison.previous if judged.comparison else None
            threshold = judged.threshold
            if threshold and threshold.status in ("breach", "missing"):
                found = ThresholdBreach(
                    test_name=test_name,
                    detail=detail,
                    value=threshold.value,
                    min=threshold.min,
                    max=threshold.max,
                    previous=previous,
                    reason=threshold.reason,
                )
                (breaches if threshold.status == "breach" else on_nothing).append(found)
            change = judged.change_point
            if change:
                regressions.append(
                    Regression(
                        test_name=test_name,
                        detail=detail,
                        before=change.baseline,
                        after=change.current,
                        change_percent=change.change_percent,
                        better=change.better,
                        p_value=change.p_value,
                        since_run_id=change.since_run_id,
                    )
                )
    verdict: Verdict | None = verdicts.verdict if verdicts else (summary.verdict if summary else None)
    return Findings(
        verdict=verdict,
        failed_scenarios=failed,
        not_run_scenarios=not_run,
        breaches=tuple(breaches),
        thresholds_on_nothing=tuple(on_nothing),
        regressions=tuple(regressions),
        profile_changes=tuple(
            ProfileChange(
                scenario=scenario,
                change=cpu_change_sentence(profile.comparison),
                grew=tuple(c.function for c in profile.comparison.cumulative_grew),
            )
            for scenario, profile in (verdicts.profiles if verdicts else {}).items()
            if profile.flagged and profile.comparison is not None
        ),
    )
