"""The pipeline's alert about one DAG run: a subject, a plain-text body and the same content as JSON. Pure.

Two events: a run that failed (any failed task, including ``publish_results`` failed by a threshold
breach or a regression after publishing) and a run still going past its time limit. The mail carries
the text, the webhook the JSON (whose ``text`` field is the same text, so chat webhooks that show a
``text`` field show the whole alert).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from kai_scale.alerts.findings import FailedScenario, Findings, ThresholdBreach, findings
from kai_scale.publishing.run_summary import RunSummary
from kai_scale.verdicts.document import Verdicts
from kai_scale_model.durations import format_duration

SUBJECT_PREFIX = "[KAI scale]"
SECONDS = "durations in seconds"
_URL = re.compile(r"https?://[^\s<>&]+")


@dataclass(frozen=True, kw_only=True)
class AlertRun:
    """The DAG run an alert is about, and where people look at it."""

    dag_id: str
    """The DAG."""
    airflow_run_id: str
    """Airflow's run id."""
    run_id: str | None
    """The pipeline's run id (``<UTC time>-<kind>-<hash>``); None when it cannot be known."""
    node_count: int | None
    """The run's ``node_count``."""
    airflow_url: str
    """The run in Airflow's UI."""
    results_url: str | None
    """The run's published ``results.json``; None before anything was published."""
    verdicts_url: str | None
    """The run's published ``verdicts.json``; None before anything was published."""


@dataclass(frozen=True, kw_only=True)
class FailedTask:
    """A task of the run that failed."""

    task_id: str
    """Its task id."""
    error: str | None
    """``<exception type>: <message>`` as its failure callback recorded it; None when none was."""


@dataclass(frozen=True, kw_only=True)
class Alert:
    """One alert, ready for any channel."""

    subject: str
    """One line: the run, its node count and what went wrong."""
    text: str
    """The whole alert as plain text."""
    payload: dict[str, Any]
    """The same content as JSON: the subject, the text and each item as data."""

    def html(self) -> str:
        """The text for an HTML mail body: preformatted, escaped, links clickable."""
        escaped = html.escape(self.text, quote=False)
        return "<pre>" + _URL.sub(lambda m: f'<a href="{m.group(0)}">{m.group(0)}</a>', escaped) + "</pre>"


def _number(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"


def _nodes(node_count: int | None) -> str:
    return "node count unknown" if node_count is None else f"{node_count} nodes"


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def _headline(found: Findings, failed_tasks: Sequence[FailedTask]) -> str:
    parts = []
    if found.failed_scenarios:
        parts.append(_plural(len(found.failed_scenarios), "scenario") + " failed")
    if found.not_run_scenarios:
        parts.append(_plural(len(found.not_run_scenarios), "scenario") + " not run")
    if found.breaches:
        parts.append(_plural(len(found.breaches), "threshold breach", "threshold breaches"))
    if found.regressions:
        parts.append(_plural(len(found.regressions), "regression"))
    if found.thresholds_on_nothing:
        parts.append(_plural(len(found.thresholds_on_nothing), "threshold") + " on nothing")
    if parts:
        return ", ".join(parts)
    if failed_tasks:
        label = "failed task" if len(failed_tasks) == 1 else "failed tasks"
        return f"{label} " + ", ".join(t.task_id for t in failed_tasks)
    return "the run failed"


def _breach_line(breach: ThresholdBreach) -> str:
    if breach.value is None:
        return f"  - {breach.reason}"
    if breach.min is not None and breach.value < breach.min:
        bound = f"< min {_number(breach.min)}"
    else:
        bound = f"> max {_number(breach.max)}"
    return (
        f"  - {breach.test_name!r} / {breach.detail!r}: {_number(breach.value)} {bound} "
        f"(previous run: {_number(breach.previous)})"
    )


def _failed_line(failed: FailedScenario) -> str:
    # The pipeline's own failures are marked: KAI's (the scenario ran and failed) need no mark.
    kind = " (infrastructure)" if failed.failure_kind == "infrastructure" else ""
    return f"  - {failed.scenario}{kind}: {failed.reason}"


def _section(title: str, lines: Sequence[str], note: str = "") -> list[str]:
    return [f"{title} ({len(lines)}{'; ' + note if note else ''}):", *lines, ""] if lines else []


def _links(run: AlertRun) -> list[str]:
    lines = [f"Airflow run:  {run.airflow_url}"]
    if run.results_url:
        lines.append(f"Results:      {run.results_url}")
    if run.verdicts_url:
        lines.append(f"Verdicts:     {run.verdicts_url}")
    return lines


def _run_payload(run: AlertRun) -> dict[str, Any]:
    return {
        "dag_id": run.dag_id,
        "airflow_run_id": run.airflow_run_id,
        "run_id": run.run_id,
        "node_count": run.node_count,
        "links": {"airflow_run": run.airflow_url, "results": run.results_url, "verdicts": run.verdicts_url},
    }


def failed_run_alert(
    *,
    run: AlertRun,
    summary: RunSummary | None,
    verdicts: Verdicts | None,
    failed_tasks: Sequence[FailedTask],
    reason: str | None = None,
    unread: str | None = None,
) -> Alert:
    """The alert about a failed run.

    :param summary: the run summary ``publish_results`` wrote; None when it wrote none.
    :param verdicts: the run's verdicts document; None when the run was not judged.
    :param failed_tasks: the run's failed tasks, with their errors.
    :param reason: why Airflow failed the run (``task_failure``), from the callback.
    :param unread: what could not be read from Airflow, when the alert goes out with less.
    """
    found = findings(summary=summary, verdicts=verdicts)
    name = run.run_id or run.airflow_run_id
    subject = (
        f"{SUBJECT_PREFIX} run {name} ({_nodes(run.node_count)}) failed: {_headline(found, failed_tasks)}"
    )
    header = [
        f"The KAI scale-test run {name} failed.",
        "",
        f"Run id:       {run.run_id or 'unknown'}",
        f"DAG run:      {run.dag_id} / {run.airflow_run_id}",
        f"Nodes:        {run.node_count if run.node_count is not None else 'unknown'}",
        f"Verdict:      {found.verdict or 'none (the run was not judged)'}",
    ]
    if reason:
        header.append(f"Airflow says: {reason}")
    if summary is None:
        # With records unread, a summary may have been written: the alert cannot tell.
        header.append(
            "publish_results wrote no run summary: below is what Airflow knows of the run."
            if unread is None
            else "No readable run summary: below is what Airflow knows of the run."
        )
    if unread:
        header.append(f"Some of the run's records could not be read: {unread}")
    body = [
        *header,
        "",
        *_section("Failed scenarios", [_failed_line(s) for s in found.failed_scenarios]),
        *_section("Scenarios not run", [f"  - {s.scenario}: {s.reason}" for s in found.not_run_scenarios]),
        *_section("Threshold breaches", [_breach_line(b) for b in found.breaches], SECONDS),
        *_section(
            "Regressions",
            [
                f"  - {r.test_name!r} / {r.detail!r}: {_number(r.before)} -> {_number(r.after)} "
                f"({r.change_percent:+.1f} %, {r.better} is better, p={r.p_value:.2g}), "
                f"since run {r.since_run_id}"
                for r in found.regressions
            ],
            f"before -> after, {SECONDS}",
        ),
        *_section(
            "Where KAI's scheduler spent its CPU differently",
            [f"  - {p.scenario}: {p.change}" for p in found.profile_changes],
            "cumulative shares of its CPU profile against the previous run's",
        ),
        *_section("Thresholds on nothing", [_breach_line(b) for b in found.thresholds_on_nothing]),
        *_section(
            "Failed tasks",
            [f"  - {t.task_id}: {t.error or 'no error recorded (see its log)'}" for t in failed_tasks],
        ),
        *_links(run),
    ]
    text = "\n".join(body) + "\n"
    return Alert(
        subject=subject,
        text=text,
        payload={
            "event": "failed",
            "subject": subject,
            "text": text,
            **_run_payload(run),
            "verdict": found.verdict,
            "reason": reason,
            "summary_written": summary is not None,
            "failed_scenarios": [asdict(s) for s in found.failed_scenarios],
            "not_run_scenarios": [asdict(s) for s in found.not_run_scenarios],
            "threshold_breaches": [asdict(b) for b in found.breaches],
            "regressions": [asdict(r) for r in found.regressions],
            "profile_changes": [asdict(p) for p in found.profile_changes],
            "thresholds_on_nothing": [asdict(b) for b in found.thresholds_on_nothing],
            "failed_tasks": [asdict(t) for t in failed_tasks],
            "unread": unread,
        },
    )


def overdue_run_alert(*, run: AlertRun, queued_at: datetime, now: datetime, limit: timedelta) -> Alert:
    """The alert about a run still going ``limit`` after it was queued."""
    # Whole seconds: "6h0m3s" rather than "6h0m3.218372s".
    running = timedelta(seconds=int((now - queued_at).total_seconds()))
    name = run.run_id or run.airflow_run_id
    subject = (
        f"{SUBJECT_PREFIX} run {name} ({_nodes(run.node_count)}) still running after "
        f"{format_duration(running)} (limit {format_duration(limit)})"
    )
    text = "\n".join(
        [
            f"The KAI scale-test run {name} has not finished {format_duration(running)} after it was "
            f"queued ({queued_at.isoformat()}); the limit is {format_duration(limit)}.",
            "It goes on running; see in Airflow which task it is at.",
            "",
            f"Run id:       {run.run_id or 'unknown'}",
            f"DAG run:      {run.dag_id} / {run.airflow_run_id}",
            f"Nodes:        {run.node_count if run.node_count is not None else 'unknown'}",
            "",
            *_links(run),
        ]
    )
    text += "\n"
    return Alert(
        subject=subject,
        text=text,
        payload={
            "event": "overdue",
            "subject": subject,
            "text": text,
            **_run_payload(run),
            "queued_at": queued_at.isoformat(),
            "running_seconds": running.total_seconds(),
            "limit_seconds": limit.total_seconds(),
        },
    )
