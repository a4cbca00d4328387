from __future__ import annotations

import json
from pathlib import Path

import pytest

from kai_scale_model.scenario import GinkgoRun, Scenario
from kai_scale_runner.ginkgo import run_suite, suite_timeout_seconds
from kai_scale_runner.ginkgo_results import verdict

ENTRY = {
    "test_name": "Fill Cluster with single GPU Jobs",
    "status": "success",
    "details": {"nodes": 500, "jobs": 4000, "time": "6m36.7s"},
}
SUITE_OK = json.dumps({"status": "success", "tests": [ENTRY]})


def _report(*states: str) -> str:
    specs = [
        {
            "ContainerHierarchyTexts": ["Kwok scale test", "Big cluster"],
            "LeafNodeText": f"spec {i}",
            "State": s,
            "Failure": {"Message": f"boom {i}"} if s != "passed" else None,
        }
        for i, s in enumerate(states)
    ]
    return json.dumps([{"SuiteSucceeded": "failed" not in states, "SpecReports": specs}])


def test_all_passed() -> None:
    result = verdict(exit_code=0, suite_json=SUITE_OK, report_json=_report("passed", "skipped"))
    assert (result.status, result.reason, result.failure_kind) == ("success", None, None)
    assert [t.test_name for t in result.tests] == ["Fill Cluster with single GPU Jobs"]
    assert result.tests[0].details == ENTRY["details"]


def test_failed_spec_without_an_entry_gets_one_and_a_reason() -> None:
    result = verdict(exit_code=1, suite_json=SUITE_OK, report_json=_report("passed", "failed"))
    assert (result.status, result.failure_kind) == ("failure", "scenario"), "the suite ran and failed"
    assert result.reason == "Kwok scale test Big cluster spec 1: boom 1"
    assert result.tests[-1].test_name == "Kwok scale test Big cluster spec 1"
    assert result.tests[-1].status == "failure"


def test_exit_code_alone_fails_it() -> None:
    result = verdict(exit_code=2, suite_json=None, report_json=_report("passed"))
    assert result.status == "failure"
    assert result.reason == "the suite exited with code 2"


def test_truncated_report_fails_it_but_keeps_the_entries() -> None:
    report = _report("passed")
    result = verdict(exit_code=0, suite_json=SUITE_OK, report_json=report[: len(report) // 2])
    assert result.status == "failure"
    assert result.reason is not None
    assert "Ginkgo JSON report is unreadable (truncated?)" in result.reason
    assert len(result.tests) == 1


def test_missing_report_and_truncated_results() -> None:
    result = verdict(exit_code=0, suite_json=SUITE_OK[:20], report_json=None)
    assert result.status == "failure"
    assert result.reason is not None
    assert "kwok_scale_test.json is unreadable" in result.reason
    assert "no Ginkgo JSON report" in result.reason


def test_an_entry_written_as_failure_fails_it() -> None:
    suite = json.dumps({"status": "failure", "tests": [{**ENTRY, "status": "failure"}]})
    assert verdict(exit_code=0, suite_json=suite, report_json=_report("passed")).status == "failure"


def test_a_focus_that_matches_no_spec_fails_it() -> None:
    """Ginkgo exits 0 when the focus selects nothing; the scenario measured nothing."""
    for report in (_report("skipped", "skipped"), "[]"):
        result = verdict(exit_code=0, suite_json=None, report_json=report)
        assert result.status == "failure"
        assert result.reason == "no spec ran: the scenario's focus matched none of the suite's specs"


def test_suite_setup_nodes_do_not_count_as_specs_that_ran() -> None:
    report = json.loads(_report("skipped"))
    report[0]["SpecReports"].append({"LeafNodeType": "BeforeSuite", "State": "passed"})
    assert verdict(exit_code=0, suite_json=None, report_json=json.dumps(report)).status == "failure"


@pytest.mark.parametrize(("timeout", "suite_timeout"), [("90m", 5280), ("10m", 540), ("30s", 27), ("5s", 5)])
def test_the_suite_times_out_inside_the_pods_deadline(timeout: str, suite_timeout: int) -> None:
    scenario = Scenario.model_validate(
        {"name": "s", "description": "d", "timeout": timeout, "run": {"kind": "ginkgo", "focus": "x"}}
    )
    assert suite_timeout_seconds(scenario) == suite_timeout


def test_a_runner_image_without_the_suite_fails_as_infrastructure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KAI_SCALE_SUITE_BINARY", str(tmp_path / "absent"))
    scenario = Scenario.model_validate(
        {"name": "s", "description": "d", "timeout": "5m", "run": {"kind": "ginkgo", "focus": "x"}}
    )
    assert isinstance(scenario.run, GinkgoRun)
    exit_code, result = run_suite(scenario=scenario, run=scenario.run, node_count=1, workdir=tmp_path)
    assert (exit_code, result.status, result.failure_kind) == (127, "failure", "infrastructure")
    assert "not found or not executable" in (result.reason or "")
