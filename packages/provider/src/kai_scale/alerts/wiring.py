"""The alerts attached to a DAG from the deployment settings; nothing at all when none are set.

- A failed run (any failed task, ``publish_results`` failed by a breach or a regression included):
  each channel's notifier is a DAG ``on_failure_callback``, run by the dag-processor when the run
  fails; every task's ``on_failure_callback`` records its error for it.
- A run still going after ``KAI_SCALE_RUN_ALERT_AFTER``: a ``DeadlineAlert`` per channel, measured
  from when the run was queued, whose callback the triggerer runs. A deadline only alerts; the run
  goes on (``dagrun_timeout`` would fail it and skip its teardown).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow.sdk.bases.notifier import BaseNotifier
from airflow.sdk.definitions.callback import AsyncCallback
from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference

from kai_scale.alerts.run_records import AlertOptions, record_task_failure
from kai_scale.notifications.run_alerts import RunAlertEmailNotifier, RunAlertWebhookNotifier
from kai_scale.settings import PipelineSettings
from kai_scale_model.durations import format_duration

# A channel: its name, its notifier class and the notifier's arguments for it.
Channel = tuple[str, Callable[..., BaseNotifier], dict[str, Any]]


@dataclass(frozen=True, kw_only=True)
class AlertWiring:
    """What a DAG gets for its alerts."""

    dag_arguments: dict[str, Any]
    """Arguments of ``DAG``: ``on_failure_callback`` and ``deadline``."""
    default_args: dict[str, Any]
    """Entries of the DAG's ``default_args``: every task's ``on_failure_callback``."""


def _channels(settings: PipelineSettings) -> list[Channel]:
    alerts = settings.alerts
    channels: list[Channel] = []
    if alerts.email_to:
        channels.append(
            (
                "mail",
                RunAlertEmailNotifier,
                {
                    "to": list(alerts.email_to),
                    "smtp_conn_id": alerts.smtp_conn_id,
                    "from_email": alerts.email_from,
                },
            )
        )
    if alerts.webhook_conn_id:
        channels.append(("webhook", RunAlertWebhookNotifier, {"http_conn_id": alerts.webhook_conn_id}))
    return channels


def alert_wiring(settings: PipelineSettings) -> AlertWiring:
    """The alert notifiers, deadlines and failure recording for a DAG built with ``settings``."""
    alerts = settings.alerts
    if not alerts.enabled:
        return AlertWiring(dag_arguments={}, default_args={})
    options = AlertOptions(
        results_bucket=settings.results_bucket,
        results_prefix=settings.results_prefix,
        results_url=settings.results_url,
        limit=format_duration(alerts.run_alert_after) if alerts.run_alert_after else None,
    ).as_kwargs()
    channels = _channels(settings)
    dag_arguments: dict[str, Any] = {
        "on_failure_callback": [
            notifier(**arguments, event="failed", options=options) for _, notifier, arguments in channels
        ]
    }
    if alerts.run_alert_after is not None:
        dag_arguments["deadline"] = [
            DeadlineAlert(
                reference=DeadlineReference.DAGRUN_QUEUED_AT,
                interval=alerts.run_alert_after,
                callback=AsyncCallback(
                    notifier, kwargs={**arguments, "event": "overdue", "options": options}
                ),
                name=f"run-time limit ({name})",
            )
            for name, notifier, arguments in channels
        ]
    return AlertWiring(dag_arguments=dag_arguments, default_args={"on_failure_callback": record_task_failure})
