"""Collecting a scenario's metrics over its own window: range queries plus the value at the window's end.

Everything but the client is pure; a query that fails is recorded as missing, never dropped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kai_scale.metrics.prometheus_api import PrometheusClient, PrometheusError, Series
from kai_scale.metrics.summaries import summarize
from kai_scale_model.metric_query import MetricQuery


@dataclass(frozen=True, kw_only=True)
class Window:
    """When a scenario ran."""

    start: datetime
    end: datetime
    source: str
    """``runner`` (the runner's own start and end) or ``task`` (the task around the pod)."""

    def to_dict(self) -> dict[str, str]:
        """JSON form."""
        return {"start": self.start.isoformat(), "end": self.end.isoformat(), "source": self.source}


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def scenario_window(
    *, outcome: Mapping[str, Any] | None, task_window: Mapping[str, Any] | None
) -> Window | None:
    """The runner's start and end when it reported them, else the task's window around the pod."""
    if outcome and outcome.get("started_at") and outcome.get("finished_at"):
        return Window(start=_time(outcome["started_at"]), end=_time(outcome["finished_at"]), source="runner")
    if task_window and task_window.get("start") and task_window.get("end"):
        return Window(start=_time(task_window["start"]), end=_time(task_window["end"]), source="task")
    return None


def _number(value: float) -> float | None:
    # JSON has no NaN or infinity; the dashboard's JSON.parse would refuse them.
    return value if math.isfinite(value) else None


def _query_result(query: MetricQuery, over_window: list[Series], at_end: list[Series]) -> dict[str, Any]:
    return {
        "query": query.query,
        "unit": query.unit,
        "description": query.description,
        "status": "ok",
        "error": None,
        "summary": summarize([value for series in over_window for _, value in series.points]),
        "at_end": [
            {"labels": s.labels, "value": _number(s.points[0][1]) if s.points else None} for s in at_end
        ],
        "series": [
            {
                "labels": s.labels,
                "summary": summarize([value for _, value in s.points]),
                "values": [[time, _number(value)] for time, value in s.points],
            }
            for s in over_window
        ],
    }


def missing_query(query: MetricQuery, error: str) -> dict[str, Any]:
    """A query whose values could not be collected."""
    return {
        "query": query.query,
        "unit": query.unit,
        "description": query.description,
        "status": "missing",
        "error": error,
    }


def collect_scenario(
    client: PrometheusClient, *, queries: Sequence[MetricQuery], window: Window, step: timedelta
) -> dict[str, Any]:
    """Every query over ``window``; each failing query is marked missing with Prometheus' error."""
    metrics: dict[str, Any] = {}
    for query in queries:
        try:
            over_window = client.query_range(query.query, start=window.start, end=window.end, step=step)
            at_end = client.query(query.query, at=window.end)
        except PrometheusError as error:
            metrics[query.name] = missing_query(query, str(error))
        else:
            metrics[query.name] = _query_result(query, over_window, at_end)
    failed = [name for name, result in metrics.items() if result["status"] == "missing"]
    status = "collected" if not failed else ("missing" if len(failed) == len(metrics) else "partial")
    reason = f"queries failed: {', '.join(failed)}" if failed else None
    return {"status": status, "reason": reason, "window": window.to_dict(), "metrics": metrics}


def missing_scenario(
    *, queries: Sequence[MetricQuery], reason: str, window: Window | None = None
) -> dict[str, Any]:
    """A scenario none of whose metrics were collected, each query marked missing with ``reason``."""
    return {
        "status": "missing",
        "reason": reason,
        "window": window.to_dict() if window else None,
        "metrics": {query.name: missing_query(query, reason) for query in queries},
    }


def metrics_document(
    *, run_id: str, prometheus_url: str | None, step: timedelta, scenarios: Mapping[str, Any]
) -> dict[str, Any]:
    """``metrics.json``: per scenario, its window and each named query's summary and raw series."""
    return {
        "run_id": run_id,
        "prometheus": prometheus_url,
        "step_seconds": step.total_seconds(),
        "scenarios": dict(scenarios),
    }


def missing_scenarios(document: Mapping[str, Any]) -> list[str]:
    """Scenarios of a metrics document with metrics missing (entirely or in part)."""
    return [
        name
        for name, entry in document.get("scenarios", {}).items()
        if entry.get("status") in ("missing", "partial")
    ]


def unwritten_metrics(*, run_id: str, scenarios: Sequence[Any]) -> dict[str, Any]:
    """The metrics document when the metrics task wrote none (it crashed, or never ran)."""
    reason = "the collect_metrics task wrote no metrics (see its log)"
    return {
        "run_id": run_id,
        "prometheus": None,
        "step_seconds": None,
        "scenarios": {
            s.name: {"status": "missing", "reason": reason, "window": None, "metrics": {}} for s in scenarios
        },
    }


PROMETHEUS_PLACEHOLDER = "<prometheus>"


def public_metrics(document: Mapping[str, Any]) -> dict[str, Any]:
    """``metrics.json`` as published: without Prometheus' address, which is internal to the deployment.

    The internal copy under ``runs/`` keeps it for operators; here the ``prometheus`` field goes and
    the address is replaced wherever an error reason quotes it.
    """
    url = document.get("prometheus")
    text = json.dumps({key: value for key, value in document.items() if key != "prometheus"})
    if url:
        # Replaced inside the JSON text: reasons are JSON strings, where the URL appears escaped.
        text = text.replace(json.dumps(url)[1:-1], PROMETHEUS_PLACEHOLDER)
    published: dict[str, Any] = json.loads(text)
    return published
