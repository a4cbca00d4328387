"""Turning the KAI suite's outputs into a scenario outcome. Pure: no I/O.

The suite writes ``kwok_scale_test.json`` (``{"status", "tests": [...]}``) but a failing spec usually
writes no entry, so pass/fail comes from the suite's exit status and its Ginkgo JSON report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kai_scale_model.outcome import FailureKind, Status, TestResult

FAILED_STATES = {"failed", "panicked", "interrupted", "aborted", "timedout"}


@dataclass(frozen=True, kw_only=True)
class SuiteVerdict:
    """Status, reason and tests derived from the suite's exit code and files."""

    status: Status
    """Overall status of the scenario."""
    reason: str | None
    """Why it failed (or None)."""
    tests: tuple[TestResult, ...]
    """The suite's entries, plus one failure entry per failed spec that wrote none."""
    failure_kind: FailureKind | None
    """``scenario`` when the suite ran and failed, ``infrastructure`` when it could not run; else None."""


def read_suite_results(text: str | None) -> tuple[tuple[TestResult, ...], str | None]:
    """The entries of ``kwok_scale_test.json`` and a problem description if it is unreadable."""
    if text is None:
        return (), None
    try:
        document = json.loads(text)
        tests = tuple(
            TestResult(test_name=t["test_name"], status=t["status"], details=t.get("details"))
            for t in document.get("tests", [])
        )
    except (json.JSONDecodeError, AttributeError, KeyError, TypeError) as error:
        return (), f"kwok_scale_test.json is unreadable (truncated?): {error}"
    return tests, None


def spec_reports(report_text: str | None) -> tuple[list[dict[str, Any]], str | None]:
    """All spec reports of the Ginkgo JSON report, and a problem description if it is unreadable."""
    if report_text is None:
        return [], "the suite wrote no Ginkgo JSON report"
    try:
        suites = json.loads(report_text)
        return [spec for suite in suites for spec in suite.get("SpecReports") or []], None
    except (json.JSONDecodeError, AttributeError, TypeError) as error:
        return [], f"the Ginkgo JSON report is unreadable (truncated?): {error}"


def ran_specs(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The specs that ran: ``It`` nodes (suite setup nodes left out) that were not skipped or pending."""
    return [
        spec
        for spec in specs
        if spec.get("LeafNodeType", "It") == "It" and spec.get("State") not in ("skipped", "pending")
    ]


def spec_name(spec: dict[str, Any]) -> str:
    """The spec's full text, as Ginkgo's focus matches it."""
    return " ".join([*(spec.get("ContainerHierarchyTexts") or []), spec.get("LeafNodeText") or ""]).strip()


def verdict(*, exit_code: int, suite_json: str | None, report_json: str | None) -> SuiteVerdict:
    """Decide the scenario's status from everything the suite left behind."""
    tests, suite_problem = read_suite_results(suite_json)
    specs, report_problem = spec_reports(report_json)
    failures = [spec for spec in specs if spec.get("State") in FAILED_STATES]
    written = {test.test_name for test in tests}
    missing_entries = tuple(
        TestResult(
            test_name=spec_name(spec),
            status="failure",
            details={"state": spec.get("State"), "message": (spec.get("Failure") or {}).get("Message", "")},
        )
        for spec in failures
        if spec_name(spec) not in written
    )
    reasons = [f"{spec_name(s)}: {(s.get('Failure') or {}).get('Message', s.get('State'))}" for s in failures]
    if exit_code != 0 and not reasons:
        reasons.append(f"the suite exited with code {exit_code}")
    reasons += [problem for problem in (suite_problem, report_problem) if problem]
    if report_problem is None and not ran_specs(specs):
        # A focus that matches nothing (a typo, a renamed context) exits 0 and measures nothing.
        reasons.append("no spec ran: the scenario's focus matched none of the suite's specs")
    failed = exit_code != 0 or bool(failures) or any(t.status != "success" for t in tests)
    if not failed and (suite_problem or report_problem or not ran_specs(specs)):
        failed = True
    if failed and not reasons:
        reasons.append("the suite reported a failed test")
    return SuiteVerdict(
        status="failure" if failed else "success",
        reason="; ".join(reasons) if failed else None,
        tests=tests + missing_entries,
        failure_kind="scenario" if failed else None,
    )
