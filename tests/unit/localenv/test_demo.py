from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kai_scale.views.plugin import UI_ROUTE, URL_PREFIX
from localenv.demo import import_failure, run_conf, table, view_url


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


def _import_error(filename: str, timestamp: str, trace: str) -> dict[str, object]:
    """An entry of GET /api/v2/importErrors as Airflow 3.3.2 answers it."""
    return {
        "import_error_id": 1,
        "timestamp": timestamp,
        "filename": filename,
        "bundle_name": "dags-folder",
        "stack_trace": trace,
    }


def test_the_dag_files_import_error_since_the_upgrade_is_named_by_its_last_line() -> None:
    trace = (
        'Traceback (most recent call last):\n  File "/opt/airflow/dags/kai_scale_nightly.py", line 22\n'
        "    from kai_scale.dag_factory import build_nightly_dag\n"
        "ModuleNotFoundError: No module named 'kai_scale'\n\n"
    )
    errors = {
        "import_errors": [
            _import_error("other_team.py", "2026-11-27T22:40:00Z", "SyntaxError: invalid syntax"),
            _import_error("old_kai_scale_nightly.py", "2026-11-27T22:40:00Z", "NameError: another file"),
            _import_error("kai_scale_nightly.py", "2026-11-27T22:40:00.5Z", trace),
        ],
        "total_entries": 3,
    }
    upgraded = datetime(2026, 11, 27, 22, 39, tzinfo=UTC)
    assert import_failure(errors, since=upgraded) == (
        "kai_scale_nightly.py: ModuleNotFoundError: No module named 'kai_scale'"
    )
    assert import_failure(errors, since=None) is not None, "a release left as it was: any recorded error"
    assert import_failure(errors, since=upgraded + timedelta(minutes=5)) is None, "recorded before: stale"
    assert import_failure({"import_errors": [], "total_entries": 0}, since=None) is None
