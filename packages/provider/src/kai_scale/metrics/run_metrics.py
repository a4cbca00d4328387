"""The run's metrics document: every selected scenario's metrics over its own window.

Prometheus being unreachable, or a query failing, marks those metrics missing with the reason; the
document is always complete, so the run can be published whatever became of its metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta

from kai_scale.metrics.collection import (
    RunMetrics,
    ScenarioMetrics,
    Window,
    collect_scenario,
    metrics_document,
    missing_scenario,
)
from kai_scale.metrics.profile import MetricsProfile
from kai_scale.metrics.prometheus_api import PrometheusClient, PrometheusError
from kai_scale_model.metric_query import MetricQuery
from kai_scale_model.scenario import Scenario


def collect_run_metrics(
    *,
    run_id: str,
    profile: MetricsProfile,
    scenarios: Sequence[Scenario],
    windows: Mapping[str, Window | None],
    connect: Callable[[], PrometheusClient],
) -> RunMetrics:
    """``metrics.json`` for ``scenarios`` (the selected ones), each over ``windows[name]``.

    :param connect: opens the client; a PrometheusError from it marks everything missing.
    """
    queries = {s.name: profile.with_additions(s.metrics, owner=f"scenario {s.name}") for s in scenarios}
    try:
        client = connect()
    except PrometheusError as error:
        return _all_missing(
            run_id=run_id,
            step=profile.step,
            queries=queries,
            windows=windows,
            reason=str(error),
            prometheus_url=None,
        )
    with client:
        try:
            client.check()
        except PrometheusError as error:
            reason = str(error)
        else:
            return metrics_document(
                run_id=run_id,
                prometheus_url=client.base_url,
                step=profile.step,
                scenarios={
                    s.name: _scenario_metrics(
                        client, profile=profile, queries=queries[s.name], window=windows.get(s.name)
                    )
                    for s in scenarios
                },
            )
    return _all_missing(
        run_id=run_id,
        step=profile.step,
        queries=queries,
        windows=windows,
        reason=reason,
        prometheus_url=client.base_url,
    )


def _scenario_metrics(
    client: PrometheusClient,
    *,
    profile: MetricsProfile,
    queries: Sequence[MetricQuery],
    window: Window | None,
) -> ScenarioMetrics:
    if window is None:
        return missing_scenario(queries=queries, reason="the scenario did not run, so it has no window")
    return collect_scenario(client, queries=queries, window=window, step=profile.step)


def _all_missing(
    *,
    run_id: str,
    step: timedelta,
    queries: Mapping[str, Sequence[MetricQuery]],
    windows: Mapping[str, Window | None],
    reason: str,
    prometheus_url: str | None,
) -> RunMetrics:
    return metrics_document(
        run_id=run_id,
        prometheus_url=prometheus_url,
        step=step,
        scenarios={
            name: missing_scenario(queries=named, reason=reason, window=windows.get(name))
            for name, named in queries.items()
        },
    )
