"""``Public/<run-id>/verdicts.json``: the run's findings and its overall verdict. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    # Not at run time: they import Otava and SciPy (~0.5 s), and the run summary (read by the DAG
    # file's alert and by every parse of it) names this module's Verdict.
    from kai_scale.verdicts.change_points import Method
    from kai_scale.verdicts.comparison import DetailComparison
    from kai_scale.verdicts.regressions import RegressionFinding
    from kai_scale.verdicts.thresholds import ThresholdFinding

Verdict = Literal["pass", "failure", "threshold", "regression", "incomplete"]


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
) -> dict[str, Any]:
    """verdicts.json: the verdict, one-line reasons, and per test and detail what was found.

    :param previous_run_ids: each scenario's previous comparable run (None: it had none).
    """
    findings = [f.reason for f in thresholds if f.status != "pass"] + [f.reason for f in regressions]
    ended = {"failure": "failed", "not_run": "did not run"}
    reasons = [
        f"{t['test_name']!r} {ended[t['status']]}" for t in tests if t.get("status") in ended
    ] + findings
    per_test: dict[str, dict[str, dict[str, Any]]] = {}

    def slot(test_name: str, detail: str) -> dict[str, Any]:
        return per_test.setdefault(test_name, {}).setdefault(detail, {})

    for row in comparison:
        slot(row.test_name, row.detail)["comparison"] = {
            "previous": row.previous,
            "current": row.current,
            "change_percent": row.change_percent,
            "previous_run_id": row.previous_run_id,
        }
    for finding in thresholds:
        slot(finding.test_name, finding.detail)["threshold"] = asdict(finding)
    for regression in regressions:
        # The change's index is into the analysed window; since_run_id names the run instead.
        change = {key: value for key, value in asdict(regression.change).items() if key != "start"}
        slot(regression.test_name, regression.detail)["change_point"] = {
            **change,
            "since_run_id": regression.since_run_id,
            "better": regression.better,
            "reason": regression.reason,
        }
    return {
        "run_id": run_id,
        "node_count": node_count,
        "verdict": overall_verdict(tests=tests, thresholds=thresholds, regressions=regressions),
        # A threshold on a test the run did not produce has no entry here: it is in reasons.
        "test_verdicts": verdicts_by_test(tests=tests, thresholds=thresholds, regressions=regressions),
        "reasons": reasons,
        # What the verdicts found beyond failed tests (breaches, thresholds on nothing, regressions).
        "findings": findings,
        "previous_run_ids": dict(previous_run_ids),
        "method": {"name": "apache-otava e-divisive", **asdict(method)},
        "tests": per_test,
    }
