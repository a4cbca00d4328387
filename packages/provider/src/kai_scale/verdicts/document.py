"""``Public/<run-id>/verdicts.json``: the run's findings and its overall verdict. Pure.

``Verdicts`` is the document: ``verdicts_document`` builds it, ``model_dump(mode="json")`` writes it
(to the bucket, and to ``publish_results``' XCom ``verdicts``, which the alert reads back with
``Verdicts.read``). Its keys, their order and their values are what KAI's dashboard and the trend view
read; the trend view reads the published history, documents of older shapes too, as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from kai_scale.verdicts.profile_comparison import ProfileComparison, cpu_change_sentence
from kai_scale.verdicts.thresholds import ThresholdFinding
from kai_scale_model.validation import JsonDocument, validated

if TYPE_CHECKING:
    # Not at run time: they import Otava and SciPy (~0.5 s), and the run summary (read by the DAG
    # file's alert and by every parse of it) names this module's Verdict.
    from kai_scale.verdicts.change_points import Method
    from kai_scale.verdicts.comparison import DetailComparison
    from kai_scale.verdicts.regressions import RegressionFinding

Verdict = Literal["pass", "failure", "threshold", "regression", "incomplete"]
METHOD_NAME = "apache-otava e-divisive"


class VerdictsError(ValueError):
    """A verdicts document that is not one (malformed, truncated); the message names its source and field."""


class DetailComparisonEntry(JsonDocument):
    """A detail beside its scenario's previous comparable run (``verdicts.comparison.DetailComparison``)."""

    previous: float | None
    current: float
    change_percent: float | None
    previous_run_id: str | None


class ChangePointEntry(JsonDocument):
    """A regression: the change found (``change_points.ChangePoint`` but its index), since which run."""

    baseline: float
    current: float
    change_percent: float
    p_value: float
    since_run_id: str
    better: Literal["lower", "higher"]
    reason: str


class JudgedDetail(JsonDocument):
    """What the verdicts found about one detail of one test entry; what was not found has no key."""

    comparison: DetailComparisonEntry | None = None
    threshold: ThresholdFinding | None = None
    change_point: ChangePointEntry | None = None

    @model_serializer(mode="wrap")
    def _without_what_was_not_found(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Absent, not null: a detail that was only compared has the one key "comparison".
        written: dict[str, Any] = handler(self)
        return {key: value for key, value in written.items() if getattr(self, key) is not None}


class MethodEntry(JsonDocument):
    """The change-point method and its parameters (``change_points.Method``)."""

    name: str
    window: int
    min_baseline: int
    max_tail: int
    max_p_value: float
    ack_tolerance: int


class ProfileVerdict(JsonDocument):
    """A scenario's CPU profile of KAI's scheduler against its previous comparable run's."""

    comparison: ProfileComparison | None
    """None: not compared (``reason`` says why)."""
    reason: str | None
    """Why not compared (no profile of the run or of that run, none readable, no previous run)."""
    flagged: bool
    """The scenario has a test judged ``threshold`` or ``regression``: its alert names the growers."""


class Verdicts(JsonDocument):
    """``verdicts.json``: the verdict, one-line reasons, and per test and detail what was found."""

    run_id: str
    node_count: int
    verdict: Verdict
    test_verdicts: dict[str, Verdict]
    """Each test entry's own verdict."""
    reasons: tuple[str, ...]
    findings: tuple[str, ...]
    """What the verdicts found beyond failed tests (breaches, thresholds on nothing, regressions)."""
    previous_run_ids: dict[str, str | None]
    """Each scenario's previous comparable run (None: it had none)."""
    method: MethodEntry
    tests: dict[str, dict[str, JudgedDetail]]
    """By test name and detail. A threshold on a test the run did not produce has no entry: it is in
    ``reasons``."""
    profiles: dict[str, ProfileVerdict] = Field(default_factory=dict)
    """By scenario with test entries; runs judged before profiles existed have none."""

    @classmethod
    def read(cls, document: object, *, source: str) -> Verdicts:
        """``document`` (parsed JSON) validated; VerdictsError names ``source`` and each bad field."""
        return validated(cls, document, what=f"verdicts {source}", error=VerdictsError)


def with_profiles(
    verdicts: Verdicts,
    *,
    comparisons: Mapping[str, ProfileComparison | str],
    scenario_tests: Mapping[str, Sequence[str]],
) -> Verdicts:
    """``verdicts`` with each scenario's profile comparison, and a reason per flagged scenario.

    A flagged scenario's reason names what grew in its CPU profile, or why its profile was not
    compared: a reader of the alert learns whether there is profile evidence at all.

    :param comparisons: by scenario, its comparison or why there is none.
    :param scenario_tests: by scenario, the names of its test entries (whose verdicts flag it).
    """
    flagged = {
        scenario
        for scenario, names in scenario_tests.items()
        if any(verdicts.test_verdicts.get(name) in ("threshold", "regression") for name in names)
    }
    profiles = {
        scenario: ProfileVerdict(
            comparison=found if isinstance(found, ProfileComparison) else None,
            reason=found if isinstance(found, str) else None,
            flagged=scenario in flagged,
        )
        for scenario, found in comparisons.items()
    }
    explained = [
        f"{scenario}: KAI's scheduler {cpu_change_sentence(profile.comparison)}"
        if profile.comparison is not None
        else f"{scenario}: KAI's scheduler's CPU profile not compared: {profile.reason}"
        for scenario, profile in profiles.items()
        if profile.flagged
    ]
    return verdicts.model_copy(update={"profiles": profiles, "reasons": (*verdicts.reasons, *explained)})


def overall_verdict(
    *,
    tests: Sequence[Mapping[str, Any]],
    thresholds: Sequence[ThresholdFinding],
    regressions: Sequence[object],
) -> Verdict:
    """The worst of: a failed test, a breach, a regression, something not measured; else ``pass``.

    Not measured (``incomplete``): a scenario that did not run (KAI missing or not ready: it is no
    KAI failure or regression, and no pass either), or a threshold on a test or detail not produced.
    """
    if any(test.get("status") == "failure" for test in tests):
        return "failure"
    if any(finding.status == "breach" for finding in thresholds):
        return "threshold"
    if regressions:
        return "regression"
    if any(test.get("status") == "not_run" for test in tests) or any(
        finding.status == "missing" for finding in thresholds
    ):
        return "incomplete"
    return "pass"


def verdicts_by_test(
    *,
    tests: Sequence[Mapping[str, Any]],
    thresholds: Sequence[ThresholdFinding],
    regressions: Sequence[RegressionFinding],
) -> dict[str, Verdict]:
    """Each test entry's own verdict, by the same order of worse as the run's."""
    verdicts: dict[str, Verdict] = {}
    for test in tests:
        name = str(test.get("test_name"))
        verdicts[name] = overall_verdict(
            tests=[test],
            thresholds=[f for f in thresholds if f.test_name == name],
            regressions=[f for f in regressions if f.test_name == name],
        )
    return verdicts


def verdicts_document(
    *,
    run_id: str,
    node_count: int,
    tests: Sequence[Mapping[str, Any]],
    thresholds: Sequence[ThresholdFinding],
    regressions: Sequence[RegressionFinding],
    comparison: Sequence[DetailComparison],
    previous_run_ids: Mapping[str, str | None],
    method: Method,
) -> Verdicts:
    """verdicts.json: the verdict, one-line reasons, and per test and detail what was found.

    :param previous_run_ids: each scenario's previous comparable run (None: it had none).
    """
    findings = [f.reason for f in thresholds if f.status != "pass"] + [f.reason for f in regressions]
    ended = {"failure": "failed", "not_run": "did not run"}
    reasons = [
        f"{t['test_name']!r} {ended[t['status']]}" for t in tests if t.get("status") in ended
    ] + findings
    # What was found, by test and detail in the order first found (comparisons, thresholds, regressions).
    found: dict[str, dict[str, dict[str, Any]]] = {}

    def slot(test_name: str, detail: str) -> dict[str, Any]:
        return found.setdefault(test_name, {}).setdefault(detail, {})

    for row in comparison:
        slot(row.test_name, row.detail)["comparison"] = DetailComparisonEntry(
            previous=row.previous,
            current=row.current,
            change_percent=row.change_percent,
            previous_run_id=row.previous_run_id,
        )
    for finding in thresholds:
        slot(finding.test_name, finding.detail)["threshold"] = finding
    for regression in regressions:
        # The change's index is into the analysed window; since_run_id names the run instead.
        change = regression.change
        slot(regression.test_name, regression.detail)["change_point"] = ChangePointEntry(
            baseline=change.baseline,
            current=change.current,
            change_percent=change.change_percent,
            p_value=change.p_value,
            since_run_id=regression.since_run_id,
            better=regression.better,
            reason=regression.reason,
        )
    return Verdicts(
        run_id=run_id,
        node_count=node_count,
        verdict=overall_verdict(tests=tests, thresholds=thresholds, regressions=regressions),
        test_verdicts=verdicts_by_test(tests=tests, thresholds=thresholds, regressions=regressions),
        reasons=tuple(reasons),
        findings=tuple(findings),
        previous_run_ids=dict(previous_run_ids),
        method=MethodEntry(name=METHOD_NAME, **asdict(method)),
        tests={
            test_name: {detail: JudgedDetail(**judged) for detail, judged in details.items()}
            for test_name, details in found.items()
        },
    )
