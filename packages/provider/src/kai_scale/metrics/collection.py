"""Collecting a scenario's metrics over its own window: range queries plus the value at the window's end.

Everything but the client is pure; a query that fails is recorded as missing, never dropped.

``RunMetrics`` is the run's metrics document (``runs/<run-id>/metrics.json``): ``collect_metrics``
writes its ``model_dump(mode="json")``, ``publish_results`` reads it back with ``RunMetrics.read`` and
publishes it without Prometheus' address (``public_metrics``). The trend view reads the published
copies as JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import Field

from kai_scale.metrics.prometheus_api import PrometheusClient, PrometheusError, Series
from kai_scale.metrics.summaries import summarize
from kai_scale_model.metric_query import MetricQuery
from kai_scale_model.scenario import Scenario
from kai_scale_model.validation import JsonDocument, validated_json


class MetricsDocumentError(ValueError):
    """A metrics document that is not one (not JSON, malformed, truncated); names its source and field."""


class WindowEntry(JsonDocument):
    """A scenario's window as written (``Window.to_dict``): ISO 8601 times as Python writes them."""

    start: str
    end: str
    source: str


class SeriesSummary(JsonDocument):
    """``summaries.summarize`` of finite values."""

    samples: int
    min: float
    avg: float
    max: float
    p50: float
    p90: float
    p99: float


class ValueAtEnd(JsonDocument):
    """One series' value at the window's end (None: not a finite number)."""

    labels: dict[str, str]
    value: float | None


class SeriesValues(JsonDocument):
    """One series over the window: its summary and its (unix time, value) points."""

    labels: dict[str, str]
    summary: SeriesSummary | None
    values: tuple[tuple[float, float | None], ...]


class CollectedQuery(JsonDocument):
    """A named query collected over the window."""

    query: str
    unit: str
    description: str
    status: Literal["ok"]
    error: None
    summary: SeriesSummary | None
    """Of every series' finite values together (None: there were none)."""
    at_end: tuple[ValueAtEnd, ...]
    series: tuple[SeriesValues, ...]


class MissingQuery(JsonDocument):
    """A named query whose values could not be collected, and why."""

    query: str
    unit: str
    description: str
    status: Literal["missing"]
    error: str


QueryResult = Annotated[CollectedQuery | MissingQuery, Field(discriminator="status")]


class ScenarioMetrics(JsonDocument):
    """One scenario's metrics over its window."""

    status: Literal["collected", "partial", "missing"]
    reason: str | None
    window: WindowEntry | None
    metrics: dict[str, QueryResult]


class RunMetrics(JsonDocument):
    """``metrics.json``: per scenario, its window and each named query's summary and raw series."""

    run_id: str
    prometheus: str | None
    """Prometheus' address (None: not connected); left out of the published copy."""
    step_seconds: float | None
    scenarios: dict[str, ScenarioMetrics]

    @classmethod
    def read(cls, text: str, *, source: str) -> RunMetrics:
        """``text`` parsed and validated; MetricsDocumentError names ``source`` and each bad field."""
        return validated_json(cls, text, what=f"metrics {source}", error=MetricsDocumentError)


@dataclass(frozen=True, kw_only=True)
class Window:
    """When a scenario ran."""

    start: datetime
    end: datetime
    source: str
    """``runner`` (the runner's own start and end) or ``task`` (the task around the pod)."""

    def to_entry(self) -> WindowEntry:
        """As the metrics document has it."""
        return WindowEntry(start=self.start.isoformat(), end=self.end.isoformat(), source=self.source)


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


def _summary(values: Sequence[float]) -> SeriesSummary | None:
    summary = summarize(values)
    return SeriesSummary.model_validate(summary) if summary is not None else None


def _query_result(query: MetricQuery, over_window: list[Series], at_end: list[Series]) -> CollectedQuery:
    return CollectedQuery(
        query=query.query,
        unit=query.unit,
        description=query.description,
        status="ok",
        error=None,
        summary=_summary([value for series in over_window for _, value in series.points]),
        at_end=tuple(
            ValueAtEnd(labels=s.labels, value=_number(s.points[0][1]) if s.points else None) for s in at_end
        ),
        series=tuple(
            SeriesValues(
                labels=s.labels,
                summary=_summary([value for _, value in s.points]),
                values=tuple((time, _number(value)) for time, value in s.points),
            )
            for s in over_window
        ),
    )


def missing_query(query: MetricQuery, error: str) -> MissingQuery:
    """A query whose values could not be collected."""
    return MissingQuery(
        query=query.query, unit=query.unit, description=query.description, status="missing", error=error
    )


def collect_scenario(
    client: PrometheusClient, *, queries: Sequence[MetricQuery], window: Window, step: timedelta
) -> ScenarioMetrics:
    """Every query over ``window``; each failing query is marked missing with Prometheus' error."""
    metrics: dict[str, CollectedQuery | MissingQuery] = {}
    for query in queries:
        try:
            over_window = client.query_range(query.query, start=window.start, end=window.end, step=step)
            at_end = client.query(query.query, at=window.end)
        except PrometheusError as error:
            metrics[query.name] = missing_query(query, str(error))
        else:
            metrics[query.name] = _query_result(query, over_window, at_end)
    failed = [name for name, result in metrics.items() if result.status == "missing"]
    status: Literal["collected", "partial", "missing"] = (
        "collected" if not failed else ("missing" if len(failed) == len(metrics) else "partial")
    )
    reason = f"queries failed: {', '.join(failed)}" if failed else None
    return ScenarioMetrics(status=status, reason=reason, window=window.to_entry(), metrics=metrics)


def missing_scenario(
    *, queries: Sequence[MetricQuery], reason: str, window: Window | None = None
) -> ScenarioMetrics:
    """A scenario none of whose metrics were collected, each query marked missing with ``reason``."""
    return ScenarioMetrics(
        status="missing",
        reason=reason,
        window=window.to_entry() if window else None,
        metrics={query.name: missing_query(query, reason) for query in queries},
    )


def metrics_document(
    *, run_id: str, prometheus_url: str | None, step: timedelta, scenarios: Mapping[str, ScenarioMetrics]
) -> RunMetrics:
    """``metrics.json``: per scenario, its window and each named query's summary and raw series."""
    return RunMetrics(
        run_id=run_id, prometheus=prometheus_url, step_seconds=step.total_seconds(), scenarios=dict(scenarios)
    )


def missing_scenarios(document: RunMetrics) -> list[str]:
    """Scenarios of a metrics document with metrics missing (entirely or in part)."""
    return [name for name, entry in document.scenarios.items() if entry.status in ("missing", "partial")]


# The default profile's query of the pods bound per second (include/metrics/default.yaml).
POD_BINDING_RATE = "pod_binding_rate"


def pods_bound(scenario: Mapping[str, Any] | None) -> int | None:
    """The pods bound in a scenario's window, from its metrics as written (``ScenarioMetrics`` as JSON).

    The binding rate's mean over the window times the window's length: an estimate (the rate is over
    the minute before each step). None without the query's summary or the window, as in runs of old.
    """
    try:
        summary = scenario["metrics"][POD_BINDING_RATE]["summary"] if scenario else None
        window = scenario["window"] if scenario else None
        if not summary or not window:
            return None
        seconds = (_time(window["end"]) - _time(window["start"])).total_seconds()
        return round(float(summary["avg"]) * seconds)
    except (KeyError, TypeError, ValueError):
        return None


UNWRITTEN_REASON = "the collect_metrics task wrote no metrics (see its log)"


def unwritten_metrics(
    *, run_id: str, scenarios: Sequence[Scenario], reason: str = UNWRITTEN_REASON
) -> RunMetrics:
    """The metrics document when the metrics task wrote none (it crashed, or never ran), or none readable."""
    return RunMetrics(
        run_id=run_id,
        prometheus=None,
        step_seconds=None,
        scenarios={
            s.name: ScenarioMetrics(status="missing", reason=reason, window=None, metrics={})
            for s in scenarios
        },
    )


def metrics_to_publish(
    text: str | None, *, run_id: str, scenarios: Sequence[Scenario], source: str
) -> tuple[RunMetrics, str | None]:
    """The run's metrics document as publishing takes it, and what was wrong with it (None: nothing).

    None (collect_metrics wrote none) and a document that is not one (truncated, malformed) are both
    published as missing metrics: the results are not held back for them. The second is a problem of
    the run, named with its source and field.
    """
    if text is None:
        return unwritten_metrics(run_id=run_id, scenarios=scenarios), None
    try:
        return RunMetrics.read(text, source=source), None
    except MetricsDocumentError as error:
        unread = unwritten_metrics(run_id=run_id, scenarios=scenarios, reason=f"unreadable: {error}")
        return unread, str(error)


PROMETHEUS_PLACEHOLDER = "<prometheus>"


def public_metrics(document: RunMetrics) -> dict[str, Any]:
    """``metrics.json`` as published: without Prometheus' address, which is internal to the deployment.

    The internal copy under ``runs/`` keeps it for operators; here the ``prometheus`` field goes and
    the address is replaced wherever an error reason quotes it.
    """
    url = document.prometheus
    text = json.dumps(document.model_dump(mode="json", exclude={"prometheus"}))
    if url:
        # Replaced inside the JSON text: reasons are JSON strings, where the URL appears escaped.
        text = text.replace(json.dumps(url)[1:-1], PROMETHEUS_PLACEHOLDER)
    published: dict[str, Any] = json.loads(text)
    return published
