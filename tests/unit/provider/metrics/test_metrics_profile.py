from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kai_scale.metrics.collection import RunMetrics, ScenarioMetrics, missing_scenarios, scenario_window
from kai_scale.metrics.profile import MetricsProfileError, load_profile
from kai_scale.scenario_files import load_scenarios
from kai_scale_model.metric_query import MetricQuery
from tests.conftest import REPO

SHIPPED_PROFILE = REPO / "include" / "metrics" / "default.yaml"


def test_the_shipped_profile_covers_what_a_kai_engineer_looks_at() -> None:
    profile = load_profile(SHIPPED_PROFILE)
    queries = {q.name: q.query for q in profile.queries}
    assert profile.step == timedelta(seconds=15)
    assert "kai_e2e_scheduling_latency_milliseconds" in queries["scheduler_e2e_scheduling_latency"]
    assert "kai_open_session_latency_milliseconds" in queries["scheduler_open_session_latency"]
    assert 'subresource="binding"' in queries["pod_binding_rate"]
    assert 'controller="bindrequest"' in queries["binder_bind_rate"]
    assert 'controller="bindrequest"' in queries["binder_bind_errors"]
    assert {"apiserver_request_rate", "apiserver_request_latency_p99"} <= set(queries)
    assert {"scheduler_cpu", "scheduler_memory", "binder_cpu", "binder_memory"} <= set(queries)


def test_shipped_scenarios_add_no_clashing_query() -> None:
    profile = load_profile(SHIPPED_PROFILE)
    for scenario in load_scenarios(REPO / "include" / "scenarios"):
        profile.with_additions(scenario.metrics, owner=scenario.name)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("step: 15s\nqueries: []\n", "'queries' Tuple should have at least 1 item"),
        ("step: soon\nqueries: [{name: a, query: up, unit: x}]\n", "'step' Value error, must be a duration"),
        ("step: 15s\nqueries: [{name: A-b, query: up, unit: x}]\n", "'queries.0.name' String should match"),
        ("step: 15s\nqueries: [{name: a, query: up}]\n", "'queries.0.unit' Field required"),
        (
            "step: 15s\nqueries: [{name: a, query: up, unit: x}, {name: a, query: up, unit: x}]\n",
            "repeated: a",
        ),
        ("step: [15s\n", "cannot be read"),
    ],
)
def test_a_bad_profile_names_the_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(MetricsProfileError, match=message) as raised:
        load_profile(path)
    assert str(path) in str(raised.value)


def test_a_scenario_query_may_not_repeat_a_profile_name() -> None:
    profile = load_profile(SHIPPED_PROFILE)
    clash = MetricQuery(name="pod_binding_rate", query="up", unit="1/s")
    with pytest.raises(MetricsProfileError, match=r"scenario reclaim: metrics: .*repeated: pod_binding_rate"):
        profile.with_additions((clash,), owner="scenario reclaim")
    extra = MetricQuery(name="reclaims", query="up", unit="1/s")
    assert profile.with_additions((extra,), owner="scenario reclaim")[-1] == extra


def test_the_window_is_the_runners_own_else_the_tasks() -> None:
    outcome = {"started_at": "2026-11-22T02:00:00Z", "finished_at": "2026-11-22T02:10:00Z"}
    task = {"start": "2026-11-22T01:59:00+00:00", "end": "2026-11-22T02:11:00+00:00"}
    runner = scenario_window(outcome=outcome, task_window=task)
    assert runner is not None
    assert (runner.start, runner.end, runner.source) == (
        datetime(2026, 11, 22, 2, 0, tzinfo=UTC),
        datetime(2026, 11, 22, 2, 10, tzinfo=UTC),
        "runner",
    )
    fallback = scenario_window(outcome=None, task_window=task)
    assert fallback is not None
    assert fallback.source == "task"
    assert fallback.end == datetime(2026, 11, 22, 2, 11, tzinfo=UTC)
    assert scenario_window(outcome=None, task_window=None) is None


def test_missing_scenarios_include_partial_ones() -> None:
    document = RunMetrics(
        run_id="r",
        prometheus=None,
        step_seconds=15.0,
        scenarios={
            "a": ScenarioMetrics(status="collected", reason=None, window=None, metrics={}),
            "b": ScenarioMetrics(status="partial", reason=None, window=None, metrics={}),
            "c": ScenarioMetrics(status="missing", reason=None, window=None, metrics={}),
        },
    )
    assert missing_scenarios(document) == ["b", "c"]
