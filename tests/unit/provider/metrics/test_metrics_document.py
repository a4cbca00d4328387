"""metrics.json as a model: written as it always was, read back once and refused when it is not one."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kai_scale.metrics.collection import (
    MetricsDocumentError,
    RunMetrics,
    Window,
    collect_scenario,
    metrics_document,
    metrics_to_publish,
    missing_scenario,
    public_metrics,
    unwritten_metrics,
)
from kai_scale.metrics.prometheus_api import PrometheusClient, PrometheusError, Series
from kai_scale_model.metric_query import MetricQuery
from kai_scale_model.scenario import Scenario

# Written by the previous code (json.dumps of its dicts), one per line: metrics.json as collect_metrics
# wrote it, as publish_results published it, and as publish_results made it when none was written.
INTERNAL, PUBLISHED, UNWRITTEN = Path(__file__).with_name("metrics_as_written.txt").read_text().splitlines()
SOURCE = "s3://kai-scale-results/runs/r1/metrics.json"


class _Prometheus(PrometheusClient):
    """A series with a NaN among its points, one with none; a value at the end that is infinite."""

    def __init__(self) -> None:
        super().__init__("http://prometheus.monitoring.svc:9090")

    def query_range(self, query: str, *, start: datetime, end: datetime, step: timedelta) -> list[Series]:
        if query == "broken(":
            raise PrometheusError("Prometheus refused query broken(: bad_data: parse error")
        points = [(1795384800.0, 41.0), (1795384815.0, math.nan), (1795384830.0, 43.5)]
        return [Series(labels={"action": "allocate"}, points=points), Series(labels={}, points=[])]

    def query(self, query: str, *, at: datetime) -> list[Series]:
        return [
            Series(labels={"action": "allocate"}, points=[(1795384830.0, 43.5)]),
            Series(labels={"action": "x"}, points=[(1795384830.0, math.inf)]),
        ]


def _document() -> RunMetrics:
    queries = [
        MetricQuery(name="latency_p99", query="histogram_quantile(0.99, x)", unit="ms", description="p99"),
        MetricQuery(name="binder_errors", query="broken(", unit="1/s"),
    ]
    window = Window(
        start=datetime(2026, 11, 22, 2, 0, tzinfo=UTC),
        end=datetime(2026, 11, 22, 2, 8, tzinfo=UTC),
        source="runner",
    )
    return metrics_document(
        run_id="r1",
        prometheus_url="http://prometheus.monitoring.svc:9090",
        step=timedelta(seconds=15),
        scenarios={
            "sanity-fill-cluster": collect_scenario(
                _Prometheus(), queries=queries, window=window, step=timedelta(seconds=15)
            ),
            "reclaim": missing_scenario(
                queries=queries, reason="the scenario did not run, so it has no window"
            ),
        },
    )


def test_metrics_are_written_and_published_as_they_always_were_and_read_back_unchanged() -> None:
    document = _document()
    assert json.dumps(document.model_dump(mode="json")) == INTERNAL
    assert json.dumps(public_metrics(document)) == PUBLISHED
    scenario = Scenario.model_validate(
        {"name": "s", "description": "d", "timeout": "1m", "run": {"kind": "workload", "pods_per_node": 1}}
    )
    assert (
        json.dumps(unwritten_metrics(run_id="r1", scenarios=[scenario]).model_dump(mode="json")) == UNWRITTEN
    )
    read = RunMetrics.read(INTERNAL, source=SOURCE)
    assert read == document
    assert json.dumps(read.model_dump(mode="json")) == INTERNAL
    assert RunMetrics.read(UNWRITTEN, source=SOURCE).scenarios["s"].status == "missing"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda m: m.pop("scenarios"), "'scenarios' Field required"),
        (
            lambda m: m["scenarios"]["reclaim"].update(status="gone"),
            "'scenarios.reclaim.status' Input should be",
        ),
        (
            lambda m: m["scenarios"]["sanity-fill-cluster"]["metrics"]["latency_p99"].pop("series"),
            "'scenarios.sanity-fill-cluster.metrics.latency_p99.ok.series' Field required",
        ),
        (
            lambda m: m["scenarios"]["reclaim"]["metrics"]["binder_errors"].update(status="lost"),
            "'scenarios.reclaim.metrics.binder_errors' Input tag 'lost' found using 'status' does not match",
        ),
    ],
)
def test_a_malformed_or_truncated_document_is_refused_naming_its_source_and_field(
    change: Callable[[dict[str, Any]], object], field: str
) -> None:
    written = json.loads(INTERNAL)
    change(written)
    with pytest.raises(MetricsDocumentError, match=f"^metrics {re.escape(SOURCE)}: .*{re.escape(field)}"):
        RunMetrics.read(json.dumps(written), source=SOURCE)


def test_a_document_that_is_not_json_is_refused_naming_its_source() -> None:
    with pytest.raises(MetricsDocumentError, match=f"^metrics {re.escape(SOURCE)} is not JSON"):
        RunMetrics.read(INTERNAL[:100], source=SOURCE)


def test_publishing_takes_a_document_that_is_not_one_as_missing_metrics_and_names_it() -> None:
    """The results are published all the same; the run's problems name the document and why."""
    scenario = Scenario.model_validate(
        {"name": "s", "description": "d", "timeout": "1m", "run": {"kind": "workload", "pods_per_node": 1}}
    )
    taken, problem = metrics_to_publish(INTERNAL[:100], run_id="r1", scenarios=[scenario], source=SOURCE)
    assert problem is not None
    assert problem.startswith(f"metrics {SOURCE} is not JSON (truncated?)")
    missing = taken.scenarios["s"]
    assert (missing.status, missing.reason) == ("missing", f"unreadable: {problem}")
    assert metrics_to_publish(INTERNAL, run_id="r1", scenarios=[scenario], source=SOURCE) == (
        RunMetrics.read(INTERNAL, source=SOURCE),
        None,
    )
    unwritten, nothing = metrics_to_publish(None, run_id="r1", scenarios=[scenario], source=SOURCE)
    assert (json.dumps(unwritten.model_dump(mode="json")), nothing) == (UNWRITTEN, None)
