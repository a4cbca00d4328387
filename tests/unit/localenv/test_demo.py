from __future__ import annotations

from kai_scale.views.plugin import UI_ROUTE, URL_PREFIX
from localenv.demo import run_conf, table, view_url


def test_the_demo_links_to_the_runs_page_of_the_trend_view_in_airflows_ui() -> None:
    url = view_url(port=8080, run_id="20261122T020000Z-manual-1a2b3c4d")
    assert url == f"http://localhost:8080/plugin/{UI_ROUTE}{URL_PREFIX}/runs/20261122T020000Z-manual-1a2b3c4d"


def test_the_demo_selects_scenarios_only_when_told_to() -> None:
    assert run_conf(node_count=100, scenarios=[]) == {"node_count": 100}, (
        "the DAG's default: every enabled one"
    )
    assert run_conf(node_count=100, scenarios=["reclaim", "sanity-fill-cluster"]) == {
        "node_count": 100,
        "scenarios": ["reclaim", "sanity-fill-cluster"],
    }


def test_the_demos_table_names_each_timing_by_the_test_that_measured_it() -> None:
    tests = [
        {"test_name": "Fill Cluster with single GPU Jobs", "status": "success", "details": {"time": "1m49s"}},
        {
            "test_name": "Fill Cluster with distributed Jobs",
            "status": "success",
            "details": {"time": "2m28s"},
        },
    ]
    outcome = {"started_at": "2026-11-27T02:00:00Z", "finished_at": "2026-11-27T02:05:00Z", "tests": tests}
    summary = {
        "scenarios": [
            {
                "scenario": "sanity-fill-cluster",
                "status": "success",
                "outcome": outcome,
                "reason": None,
                "outcome_key": None,
            }
        ]
    }
    row = table(summary).splitlines()[1]
    assert (
        "Fill Cluster with single GPU Jobs: time 1m49s; Fill Cluster with distributed Jobs: time 2m28s" in row
    )
    assert "300 s" in row
