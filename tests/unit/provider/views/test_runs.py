from __future__ import annotations

from typing import Any

import pytest

from kai_scale.object_keys import published_keys
from kai_scale.views.runs import RunFilter, failed_scenarios, filter_runs, page_of, run_rows


def _entry(run_id: str, timestamp: str, **fields: Any) -> dict[str, Any]:
    return {
        "timestamp": timestamp,
        "path": f"Public/{run_id}/results.json",
        "commit": "5eed00",
        "run_id": run_id,
        "airflow_run_id": f"scheduled__{timestamp}",
        "node_count": 500,
        "kai_ref": "v0.9.0",
        "status": "success",
        "verdict": "pass",
    } | fields


def test_runs_come_newest_first_whatever_the_manifests_order() -> None:
    manifest = {
        "runs": [
            _entry("b", "2026-11-21T02:00:00Z"),
            _entry("c", "2026-11-22T02:00:00Z"),
            _entry("a", "2026-11-20T02:00:00Z"),
        ]
    }
    assert [row.run_id for row in run_rows(manifest)] == ["c", "b", "a"]


def test_an_entry_written_by_others_is_shown_with_what_it_has() -> None:
    legacy = {"timestamp": "2026-07-01T00:00:00Z", "path": "Public/old-run/results.json", "commit": "x"}
    (row,) = run_rows({"runs": [legacy, {"note": "no path: nothing to show"}]})
    assert row.run_id == "old-run"
    assert (row.node_count, row.verdict, row.kai_ref, row.airflow_run_id) == (None, None, None, None)
    assert row.outcome == "unknown"
    assert row.keys == published_keys(prefix="Public/", run_id="old-run")
    assert row.failed_scenarios is None, "not known from the entry"
    assert (row.failure_kind, row.not_run_scenarios) == (None, ()), "older entries have neither"


def test_the_outcome_is_the_verdict_or_before_verdicts_the_status() -> None:
    judged, older = run_rows(
        {
            "runs": [
                _entry("judged", "2026-11-22T02:00:00Z", verdict="regression"),
                _entry("older", "2026-11-21T02:00:00Z", status="failure", verdict=None),
            ]
        }
    )
    assert (judged.outcome, older.outcome) == ("regression", "failure")


def test_failed_scenarios_are_the_entries_named_after_a_failed_scenario() -> None:
    results = {
        "results": {
            "status": "failure",
            "tests": [
                {"test_name": "Fill Cluster", "status": "success", "details": {"time": "6m"}},
                {"test_name": "Reclaim jobs", "status": "failure", "details": {"time": "9m"}},
                {
                    "test_name": "reclaim",
                    "status": "failure",
                    "details": {"scenario": "reclaim", "message": "m"},
                },
                {"test_name": "topology", "status": "skipped", "details": {"scenario": "topology"}},
            ],
        }
    }
    assert failed_scenarios(results) == ["reclaim"]
    assert failed_scenarios(None) == []


ROWS = run_rows(
    {
        "runs": [
            _entry("r0", "2026-11-19T02:00:00Z", status="failure", verdict=None),
            _entry("r1", "2026-11-20T02:00:00Z", node_count=100, failed_scenarios=[]),
            _entry(
                "r2",
                "2026-11-21T02:00:00Z",
                status="failure",
                verdict="failure",
                commit="c0ffee",
                failed_scenarios=["reclaim", "topology"],
            ),
            _entry(
                "r3", "2026-11-22T02:00:00Z", verdict="regression", kai_ref="v0.10.0", failed_scenarios=[]
            ),
        ]
    }
)


def test_runs_that_did_not_run_scenarios_or_failed_in_the_pipeline_are_found_by_it() -> None:
    rows = run_rows(
        {
            "runs": [
                *[_entry(f"r{n}", f"2026-11-2{n}T02:00:00Z", failed_scenarios=[]) for n in range(3)],
                _entry(
                    "incomplete",
                    "2026-11-23T02:00:00Z",
                    status="incomplete",
                    verdict="incomplete",
                    failure_kind=None,
                    failed_scenarios=[],
                    not_run_scenarios=["sanity-fill-cluster"],
                ),
                _entry(
                    "setup-failed",
                    "2026-11-24T02:00:00Z",
                    status="failure",
                    verdict="failure",
                    failure_kind="infrastructure",
                    failed_scenarios=["burst-jobs"],
                    not_run_scenarios=[],
                ),
            ]
        }
    )
    assert [r.run_id for r in filter_runs(rows, RunFilter(outcome="incomplete"))] == ["incomplete"]
    assert [r.run_id for r in filter_runs(rows, RunFilter(text="sanity"))] == ["incomplete"]
    assert [r.run_id for r in filter_runs(rows, RunFilter(text="infra"))] == ["setup-failed"]
    assert rows[1].not_run_scenarios == ("sanity-fill-cluster",)


@pytest.mark.parametrize(
    ("wanted", "shown"),
    [
        (RunFilter(), ["r3", "r2", "r1", "r0"]),
        (RunFilter(outcome="failure"), ["r2", "r0"]),
        (RunFilter(node_count=500), ["r3", "r2", "r0"]),
        (RunFilter(text="V0.10"), ["r3"]),
        (RunFilter(text="c0ffee"), ["r2"]),
        (RunFilter(text="Regress"), ["r3"]),
        (RunFilter(text="fail"), ["r2", "r0"]),
        # A failed scenario, by the name its entry gives (r0's entry, older, names none).
        (RunFilter(text="Reclaim"), ["r2"]),
        (RunFilter(text="topo", outcome="failure"), ["r2"]),
        (RunFilter(outcome="pass", node_count=500), []),
    ],
)
def test_runs_are_filtered_by_outcome_node_count_and_text_from_the_manifest(
    wanted: RunFilter, shown: list[str]
) -> None:
    assert [row.run_id for row in filter_runs(ROWS, wanted)] == shown


@pytest.mark.parametrize(("asked", "number", "rows"), [(1, 1, 2), (2, 2, 2), (9, 2, 2), (0, 1, 2)])
def test_pages_are_clamped_to_the_pages_there_are(asked: int, number: int, rows: int) -> None:
    page = page_of(ROWS, asked, size=2)
    assert (page.number, len(page.rows), page.count, page.total) == (number, rows, 2, 4)


def test_no_runs_is_one_empty_page() -> None:
    page = page_of([], 3)
    assert (page.number, page.count, page.rows) == (1, 1, [])
