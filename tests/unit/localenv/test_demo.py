from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from kai_scale.views.plugin import UI_ROUTE, URL_PREFIX
from localenv import demo
from localenv.airflow_api import AirflowApi
from localenv.demo import (
    DAG_FILE,
    DAG_ID,
    follow,
    import_failure,
    profiles_line,
    run_conf,
    run_path,
    table,
    view_url,
    wait_for_dag,
)
from localenv.processes import ComponentError
from localenv.settings import DEFAULT_BUCKET


def test_the_demo_links_to_the_runs_page_of_the_trend_view_in_airflows_ui() -> None:
    url = view_url(port=8080, run_id="20261122T020000Z-manual-1a2b3c4d")
    assert url == f"http://localhost:8080/plugin/{UI_ROUTE}{URL_PREFIX}/runs/20261122T020000Z-manual-1a2b3c4d"


def test_the_demo_names_each_scenarios_published_profiles_or_that_there_are_none() -> None:
    folder = "Public/20261122T020000Z-manual-1a2b3c4d/"
    keys = [
        f"{folder}profiles/sanity-fill-cluster/cpu.pb.gz",
        f"{folder}profiles/sanity-fill-cluster/inuse_space.pb.gz",
        f"{folder}profiles/sanity-fill-cluster/alloc_space.pb.gz",
        f"{folder}profiles/reclaim/cpu.pb.gz",
        f"{folder}profiles/reclaim/notes.txt",
    ]
    assert profiles_line(keys, folder=folder) == (
        "profiles:  reclaim: cpu; sanity-fill-cluster: alloc_space, cpu, inuse_space "
        f"(s3://{DEFAULT_BUCKET}/{folder}profiles/, `go tool pprof` opens them)"
    )
    assert (
        profiles_line([], folder=folder) == "profiles:  none published (the trend view's run page says why)"
    )


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


def _airflow(routes: dict[str, list[dict[str, Any]]]) -> AirflowApi:
    """The demo's client of Airflow's REST API, on a stand-in api-server.

    Each path answers its JSON bodies in turn, and its last one again once they run out.
    """

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/auth/token":
            return httpx.Response(201, json={"access_token": "token"})
        bodies = routes[request.url.path]
        return httpx.Response(200, json=bodies.pop(0) if len(bodies) > 1 else bodies[0])

    api = AirflowApi(base_url="http://airflow.test")
    api.close()
    api._client = httpx.Client(base_url=api.base_url, transport=httpx.MockTransport(answer))
    return api


def test_following_a_run_prints_each_task_once_as_it_finishes_and_returns_the_runs_state(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo, "POLL_SECONDS", 0)
    setup = {"task_id": "setup", "state": "success", "end_date": "2026-11-27T02:01:00Z", "duration": 60.0}
    run = {"task_id": "run_reclaim", "state": "running", "end_date": None, "duration": None}
    finished = {**run, "state": "failed", "end_date": "2026-11-27T02:05:00Z", "duration": 240.0}
    api = _airflow(
        {
            f"/api/v2{run_path('r1')}": [{"state": "running"}, {"state": "running"}, {"state": "failed"}],
            f"/api/v2{run_path('r1')}/taskInstances": [
                {"task_instances": [setup, run]},
                {"task_instances": [setup, run]},
                {"task_instances": [setup, finished]},
            ],
        }
    )
    assert follow(api, "r1") == "failed"
    assert capsys.readouterr().out.split("\n") == [
        f"  {'success':<16} setup (60 s)",
        f"  {'failed':<16} run_reclaim (240 s)",
        "",
    ]


def test_a_run_not_finished_in_time_names_the_schedulers_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "POLL_SECONDS", 0)
    api = _airflow(
        {
            f"/api/v2{run_path('r1')}": [{"state": "queued"}],
            f"/api/v2{run_path('r1')}/taskInstances": [{"task_instances": []}],
        }
    )
    with pytest.raises(
        ComponentError, match=r"^airflow: run r1 not finished after 0 h; see the scheduler's log"
    ):
        follow(api, "r1", timeout_seconds=0)


def test_a_dag_not_parsed_in_time_says_when_it_was_parsed_last(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "PARSE_TIMEOUT_SECONDS", 0)
    since = datetime(2026, 11, 27, 22, 39, tzinfo=UTC)
    api = _airflow(
        {
            "/api/v2/importErrors": [{"import_errors": [], "total_entries": 0}],
            f"/api/v2/dags/{DAG_ID}": [
                {"last_parsed_time": "2026-11-27T22:30:00Z", "has_import_errors": False}
            ],
        }
    )
    with pytest.raises(ComponentError) as waited:
        wait_for_dag(api, since=since)
    assert str(waited.value) == (
        f"airflow: {DAG_ID} not parsed after 0 s (last parsed at 2026-11-27T22:30:00Z, the upgrade ended "
        f"at {since}); see the dag-processor's log: kubectl -n airflow logs deployment/airflow-dag-processor"
    )


def test_a_dag_file_that_does_not_import_stops_the_wait_at_once() -> None:
    trace = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'kai_scale'\n"
    api = _airflow(
        {
            "/api/v2/importErrors": [
                {
                    "import_errors": [_import_error(DAG_FILE, "2026-11-27T22:40:00Z", trace)],
                    "total_entries": 1,
                }
            ],
        }
    )
    with pytest.raises(ComponentError, match=r"^airflow: the DAG file does not import in the deployment: "):
        wait_for_dag(api)
