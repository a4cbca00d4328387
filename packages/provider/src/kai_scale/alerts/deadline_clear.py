"""A clear of a run whose overdue alert is still pending: Airflow 3.3.0 to 3.3.2 refuse it (HTTP 500).

The overdue alert is a deadline measured from when the run was queued (``kai_scale.alerts.wiring``).
A clear queues the run again, and Airflow moves such deadlines with it; since 3.3.0 a deadline's
interval is stored as JSON, but the move still reads it as seconds and raises ``TypeError: unsupported
type for timedelta seconds component: dict`` (apache/airflow#70368, open). A night that fails before
its alert's time keeps that deadline pending, so the UI's Clear, how an engineer retries a failed
scenario, failed the same morning. The plugin installs ``move_queued_at_deadlines`` in its place on
the affected versions only, in every Airflow process that loads it (the api-server is the one that
clears).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import airflow
from airflow.models import taskinstance
from airflow.models.deadline import Deadline, ReferenceModels
from airflow.models.deadline_alert import DeadlineAlert as DeadlineAlertModel
from airflow.serialization.decoders import decode_deadline_alert
from airflow.serialization.definitions.deadline import (
    DeadlineAlertFields,
    SerializedReferenceModels,
    SerializedVariableInterval,
)
from sqlalchemy import false, select

if TYPE_CHECKING:
    from airflow.models.dagrun import DagRun
    from sqlalchemy.orm import Session

# The releases with the bug; a later one is expected to fix it (the open pull request #70370).
AFFECTED_AIRFLOW_VERSIONS = frozenset({"3.3.0", "3.3.1", "3.3.2"})


def queued_at_interval(alert: DeadlineAlertModel) -> timedelta | None:
    """How long after its run is queued a stored deadline alert falls; None for another reference.

    The columns are decoded as Airflow decodes them everywhere else (a variable's interval read now).
    """
    decoded = decode_deadline_alert(
        {
            DeadlineAlertFields.REFERENCE: alert.reference,
            DeadlineAlertFields.INTERVAL: alert.interval,
            DeadlineAlertFields.CALLBACK: alert.callback_def,
        }
    )
    if not isinstance(decoded.reference, SerializedReferenceModels.DagRunQueuedAtDeadline):
        return None
    interval = decoded.interval
    return interval.resolve() if isinstance(interval, SerializedVariableInterval) else interval


def move_queued_at_deadlines(dagrun: DagRun, new_queued_at: datetime, session: Session) -> None:
    """Airflow's move of a cleared run's pending queued-at deadlines (the same rows), the interval decoded.

    Writes nothing itself: the clear commits with the run's other changes.
    """
    pending = session.execute(
        select(Deadline, DeadlineAlertModel)
        .join(DeadlineAlertModel, Deadline.deadline_alert_id == DeadlineAlertModel.id)
        .where(
            Deadline.dagrun_id == dagrun.id,
            Deadline.missed == false(),
            DeadlineAlertModel.reference[ReferenceModels.REFERENCE_TYPE_FIELD].as_string()
            == ReferenceModels.DagRunQueuedAtDeadline.__name__,
        )
    ).all()
    for deadline, alert in pending:
        interval = queued_at_interval(alert)
        if interval is not None:
            deadline.deadline_time = new_queued_at + interval


def install() -> bool:
    """Put ``move_queued_at_deadlines`` in Airflow's place if this Airflow has the bug; whether it did."""
    if airflow.__version__ not in AFFECTED_AIRFLOW_VERSIONS:
        return False
    taskinstance._recalculate_dagrun_queued_at_deadlines = move_queued_at_deadlines
    return True
