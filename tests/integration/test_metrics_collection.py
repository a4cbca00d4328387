"""Metric collection against the local environment's real Prometheus (it scrapes the API server)."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kai_scale.metrics.collection import Window, collect_scenario
from kai_scale.metrics.profile import MetricsProfile, load_profile
from kai_scale.metrics.prometheus_api import PrometheusClient, PrometheusError
from kai_scale.metrics.run_metrics import collect_run_metrics
from kai_scale_model.metric_query import MetricQuery
from kai_scale_model.scenario import Scenario
from tests.conftest import REPO
from tests.integration.conftest import PROMETHEUS_HISTORY as HISTORY
from tests.waiting import wait_for

REQUEST_RATE = MetricQuery(
    name="requests", query="sum by (verb) (rate(apiserver_request_total[1m]))", unit="1/s"
)
BROKEN = MetricQuery(name="broken", query="sum(rate(apiserver_request_total[1m])", unit="1/s")


def _last(seconds: int) -> Window:
    end = datetime.now(UTC)
    return Window(start=end - timedelta(seconds=seconds), end=end, source="runner")


def test_a_scenario_window_is_summarised_with_its_raw_series(prometheus: PrometheusClient) -> None:
    result = collect_scenario(
        prometheus, queries=[REQUEST_RATE], window=_last(60), step=timedelta(seconds=5)
    ).model_dump(mode="json")
    assert result["status"] == "collected"
    requests = result["metrics"]["requests"]
    assert requests["status"] == "ok"
    verbs = {series["labels"]["verb"] for series in requests["series"]}
    assert {"GET", "LIST"} <= verbs
    # GET requests never stop (controllers poll), so their series spans the window the fixture waited for.
    (series,) = [s for s in requests["series"] if s["labels"]["verb"] == "GET"]
    assert len(series["values"]) >= HISTORY.seconds // 5, "a point every 5 s step of the rate's history"
    assert series["summary"]["samples"] == len(series["values"])
    assert set(series["summary"]) == {"samples", "min", "avg", "max", "p50", "p90", "p99"}
    assert requests["summary"]["max"] > 0
    assert requests["summary"]["min"] <= requests["summary"]["p50"] <= requests["summary"]["max"]
    assert {entry["labels"]["verb"] for entry in requests["at_end"]} == verbs


def test_a_failing_query_is_marked_missing_and_the_rest_collected(prometheus: PrometheusClient) -> None:
    result = collect_scenario(
        prometheus, queries=[BROKEN, REQUEST_RATE], window=_last(30), step=timedelta(seconds=15)
    ).model_dump(mode="json")
    assert result["status"] == "partial"
    assert result["reason"] == "queries failed: broken"
    broken = result["metrics"]["broken"]
    assert broken["status"] == "missing"
    assert "refused query" in broken["error"]
    assert "bad_data" in broken["error"], "Prometheus' own error type is kept"
    assert result["metrics"]["requests"]["status"] == "ok"


@pytest.mark.usefixtures("kai")
def test_the_shipped_profile_runs_against_prometheus(prometheus: PrometheusClient) -> None:
    """Every query of the default profile is valid PromQL, and the real KAI's scheduler is scraped."""
    profile = load_profile(REPO / "include" / "metrics" / "default.yaml")

    def collected() -> dict[str, Any]:
        return collect_scenario(
            prometheus, queries=profile.queries, window=_last(60), step=profile.step
        ).model_dump(mode="json")

    result = collected()
    assert result["status"] == "collected", result["reason"]
    assert result["metrics"]["apiserver_request_rate"]["series"]
    # A KAI installed a moment ago is scraped from the next scrape (every 15 s) on.
    wait_for(
        lambda: collected()["metrics"]["scheduler_e2e_scheduling_latency"]["series"],
        timeout=120,
        what="Prometheus to have KAI's scheduling latency",
    )


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_prometheus_marks_every_scenario_missing() -> None:
    profile = MetricsProfile(step=timedelta(seconds=15), queries=(REQUEST_RATE,))
    scenario = Scenario.model_validate(
        {"name": "s", "description": "d", "timeout": "1m", "run": {"kind": "workload", "pods_per_node": 1}}
    )
    url = f"http://127.0.0.1:{_closed_port()}"
    document = collect_run_metrics(
        run_id="r",
        profile=profile,
        scenarios=[scenario],
        windows={"s": _last(30)},
        connect=lambda: PrometheusClient(url),
    ).model_dump(mode="json")
    entry = document["scenarios"]["s"]
    assert entry["status"] == "missing"
    assert f"Prometheus at {url} is unreachable" in entry["reason"]
    assert entry["metrics"]["requests"]["status"] == "missing"
    assert entry["window"] is not None, "the window is kept, so the metrics can be collected later"
    with pytest.raises(PrometheusError, match="unreachable"), PrometheusClient(url) as client:
        client.check()
