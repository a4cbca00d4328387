"""What an alert knows of its run, read from the callback's context and through Airflow's task SDK.

The DAG's failure callback runs in the dag-processor, which answers XCom and task-state requests but
has no database: the run summary and the verdicts come from ``publish_results``' XComs, the failed
tasks from the run's task states, and each one's error from the XCom its own failure callback
(``record_task_failure``) left. The overdue alert runs in the triggerer, from the deadline's context
(the run as the scheduler saw it when the deadline passed).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote

# Airflow's own redaction of registered secrets, as its task runner applies it to rendered fields.
from airflow.sdk._shared.secrets_masker import redact
from airflow.sdk.configuration import conf
from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
from airflow.sdk.execution_time.xcom import XCom

from kai_scale.alerts.message import Alert, AlertRun, FailedTask, failed_run_alert, overdue_run_alert
from kai_scale.object_keys import published_keys
from kai_scale.params import DEFAULT_NODE_COUNT
from kai_scale.publishing.run_summary import RunSummary, RunSummaryError
from kai_scale.publishing.xcom import PUBLISH_TASK_ID, RUN_SUMMARY_XCOM_KEY, VERDICTS_XCOM_KEY
from kai_scale.run_id import pipeline_run_id
from kai_scale.verdicts.document import Verdicts, VerdictsError
from kai_scale_model.durations import parse_duration

log = logging.getLogger(__name__)

FAILURE_XCOM_KEY = "failure"
# Enough for any error the pipeline raises; a pod operator's can carry a whole pod description.
ERROR_CHARS = 2000
FINISHED_STATES = ("success", "failed")
Event = Literal["failed", "overdue"]


@dataclass(frozen=True, kw_only=True)
class AlertOptions:
    """What a notifier needs besides the run: where results are published, the run-time limit.

    Kept to JSON values: a deadline's callback arguments are stored with the serialized DAG.
    """

    results_bucket: str
    """The results bucket."""
    results_prefix: str
    """The published prefix (``Public/``)."""
    results_url: str | None
    """The published prefix over HTTP(S), for links; None links to ``s3://`` URIs."""
    limit: str | None
    """The run-time limit (``6h``) of the overdue alert."""

    def as_kwargs(self) -> dict[str, Any]:
        """As a notifier's ``options`` argument."""
        return asdict(self)


def record_task_failure(context: Mapping[str, Any]) -> None:
    """A task's ``on_failure_callback``: keep its error as XCom ``failure`` for the run's alert.

    Runs in the task's process after it failed, where the error is known and secrets it registered
    are masked. A task failed from outside (its worker lost, marked failed by someone) has no
    exception and no process of its own: the alert then says no error was recorded.
    """
    error = context.get("exception")
    if error is None:
        return
    text = str(redact(f"{type(error).__name__}: {error}"))
    context["ti"].xcom_push(key=FAILURE_XCOM_KEY, value=text[:ERROR_CHARS])


def _airflow_url(dag_id: str, airflow_run_id: str) -> str:
    # Airflow's own fallback for links (the task runner's log_url) when [api] base_url is unset.
    base = str(conf.get("api", "base_url", fallback="") or "http://localhost:8080").rstrip("/")
    return f"{base}/dags/{quote(dag_id, safe='')}/runs/{quote(airflow_run_id, safe='')}"


def _published_url(options: AlertOptions, key: str) -> str:
    if options.results_url:
        return options.results_url + key.removeprefix(options.results_prefix)
    return f"s3://{options.results_bucket}/{key}"


@dataclass(frozen=True, kw_only=True)
class _Records:
    """What ``publish_results`` and the failed tasks left in XCom."""

    summary: object
    """The run summary as read from XCom (validated by ``_validated``), or None."""
    verdicts: object
    """The verdicts as read from XCom (validated by ``_validated``), or None."""
    failed_tasks: list[FailedTask]


def _records(dag_id: str, airflow_run_id: str) -> _Records:
    def xcom(task_id: str, key: str) -> Any:
        return XCom.get_one(key=key, dag_id=dag_id, task_id=task_id, run_id=airflow_run_id)

    summary = xcom(PUBLISH_TASK_ID, RUN_SUMMARY_XCOM_KEY)
    verdicts = xcom(PUBLISH_TASK_ID, VERDICTS_XCOM_KEY)
    states = RuntimeTaskInstance.get_task_states(dag_id=dag_id, run_ids=[airflow_run_id])
    failed = sorted(task_id for task_id, state in states.get(airflow_run_id, {}).items() if state == "failed")
    return _Records(
        summary=summary,
        verdicts=verdicts,
        failed_tasks=[FailedTask(task_id=t, error=xcom(t, FAILURE_XCOM_KEY)) for t in failed],
    )


def _validated(
    records: _Records, *, airflow_run_id: str
) -> tuple[RunSummary | None, Verdicts | None, list[str]]:
    """The XComs validated, each alone, and what is wrong with those publish_results did not write.

    Each wrong one is a RunSummaryError or VerdictsError naming the XCom and the field.
    """

    def source(key: str) -> str:
        return f"XCom {key!r} of {PUBLISH_TASK_ID} (run {airflow_run_id})"

    summary: RunSummary | None = None
    verdicts: Verdicts | None = None
    wrong: list[str] = []
    try:
        if records.summary is not None:
            summary = RunSummary.read(records.summary, source=source(RUN_SUMMARY_XCOM_KEY))
    except RunSummaryError as error:
        wrong.append(f"{type(error).__name__}: {error}")
    try:
        if records.verdicts is not None:
            verdicts = Verdicts.read(records.verdicts, source=source(VERDICTS_XCOM_KEY))
    except VerdictsError as error:
        wrong.append(f"{type(error).__name__}: {error}")
    return summary, verdicts, wrong


def failed_alert_from(context: Mapping[str, Any], *, options: AlertOptions) -> Alert:
    """The alert about the failed run of a DAG's ``on_failure_callback`` context."""
    dag_id, airflow_run_id = context["dag"].dag_id, str(context["run_id"])
    dag_run = context.get("dag_run")
    summary: RunSummary | None = None
    verdicts: Verdicts | None = None
    try:
        records = _records(dag_id, airflow_run_id)
        failed_tasks, unread = records.failed_tasks, None
    except Exception as error:
        # The alert is the last word on a bad night: it goes out with what is known rather than not at all.
        log.exception("the records of run %s could not be read; alerting without them", airflow_run_id)
        failed_tasks, unread = [], f"{type(error).__name__}: {error}"
    else:
        summary, verdicts, wrong = _validated(records, airflow_run_id=airflow_run_id)
        if wrong:
            # A document that is not one is told in the alert, which goes out with the rest.
            unread = "; ".join(wrong)
            log.error("publish_results' records of run %s are not what it writes: %s", airflow_run_id, unread)
    if summary is not None:
        run_id: str | None = summary.run_id
    elif dag_run is not None:
        run_id = pipeline_run_id(airflow_run_id=airflow_run_id, run_after=dag_run.run_after)
    else:
        run_id = None
    params = context.get("params") or {}
    node_count = (summary.node_count if summary else None) or params.get("node_count")
    keys = published_keys(prefix=options.results_prefix, run_id=run_id) if summary and run_id else None
    run = AlertRun(
        dag_id=dag_id,
        airflow_run_id=airflow_run_id,
        run_id=run_id,
        node_count=int(node_count) if node_count is not None else None,
        airflow_url=_airflow_url(dag_id, airflow_run_id),
        results_url=_published_url(options, keys.results) if keys else None,
        verdicts_url=_published_url(options, keys.verdicts) if keys and verdicts else None,
    )
    return failed_run_alert(
        run=run,
        summary=summary,
        verdicts=verdicts,
        failed_tasks=failed_tasks,
        reason=context.get("reason"),
        unread=unread,
    )


def overdue_alert_from(
    context: Mapping[str, Any], *, options: AlertOptions, now: datetime | None = None
) -> Alert | None:
    """The alert about a run past its time limit, from a deadline's context; None if it has finished.

    Airflow drops a run's deadlines when it succeeds but not when it fails, so a run that failed
    early still reaches its deadline: it has had its failure alert, and gets no other.
    """
    dag_run = context["dag_run"]
    if dag_run["state"] in FINISHED_STATES or options.limit is None:
        return None
    dag_id, airflow_run_id = str(dag_run["dag_id"]), str(dag_run["dag_run_id"])
    queued_at = datetime.fromisoformat(dag_run["queued_at"] or dag_run["run_after"])
    node_count = (dag_run.get("conf") or {}).get("node_count", DEFAULT_NODE_COUNT)
    run = AlertRun(
        dag_id=dag_id,
        airflow_run_id=airflow_run_id,
        run_id=pipeline_run_id(
            airflow_run_id=airflow_run_id, run_after=datetime.fromisoformat(dag_run["run_after"])
        ),
        node_count=int(node_count),
        airflow_url=_airflow_url(dag_id, airflow_run_id),
        results_url=None,
        verdicts_url=None,
    )
    return overdue_run_alert(
        run=run, queued_at=queued_at, now=now or datetime.now(UTC), limit=parse_duration(options.limit)
    )


def run_alert(context: Mapping[str, Any], *, event: Event, options: Mapping[str, Any]) -> Alert | None:
    """The alert a notifier sends for ``event``; None when there is nothing to say."""
    parsed = AlertOptions(**options)
    if event == "failed":
        return failed_alert_from(context, options=parsed)
    return overdue_alert_from(context, options=parsed)
