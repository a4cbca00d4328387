"""The notifiers send the pipeline's alert through the SMTP and HTTP providers, to real receivers.

A mail server (aiosmtpd) and a webhook listen on loopback (tests.alert_receivers); the connections
come from AIRFLOW_CONN_* variables, as a deployment may give them. The callback's context is the one a
deadline gets (an overdue run), so no Airflow service stands behind it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

import pytest

from kai_scale.alerts.run_records import AlertOptions
from kai_scale.notifications.run_alerts import RunAlertEmailNotifier, RunAlertWebhookNotifier
from tests.alert_receivers import (
    SENDER,
    SMTP_CONN_ID,
    WEBHOOK_CONN_ID,
    WEBHOOK_PATH,
    WEBHOOK_TOKEN,
    AlertReceivers,
    html_body,
    receiving_alerts,
    text_of,
)
from tests.waiting import free_ports

if TYPE_CHECKING:
    from airflow.sdk.definitions.context import Context

OPTIONS = AlertOptions(
    results_bucket="kai-scale-results", results_prefix="Public/", results_url=None, limit="6h"
).as_kwargs()
RECIPIENT = "scale-team@example.com"


@pytest.fixture
def receivers(monkeypatch: pytest.MonkeyPatch) -> Iterator[AlertReceivers]:
    mail_port, webhook_port = free_ports(2)
    with receiving_alerts(host="127.0.0.1", mail_port=mail_port, webhook_port=webhook_port) as receivers:
        for conn_id, connection in receivers.connections().items():
            monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(connection))
        yield receivers


def _overdue_context(state: str) -> Context:
    """As the scheduler gives a deadline's callback: the run as the API serializes it (not a DagRun)."""
    return cast(
        "Context",
        {
            "dag_run": {
                "dag_id": "kai_scale_nightly",
                "dag_run_id": "scheduled__2026-11-22T02:00:00+00:00",
                "run_after": "2026-11-22T02:00:00Z",
                "queued_at": "2026-11-22T02:00:04Z",
                "state": state,
                "conf": {"node_count": 2000},
            },
            "deadline": {"id": "0195", "deadline_time": "2026-11-22T08:00:04Z"},
        },
    )


def test_the_webhook_gets_the_alerts_json_on_both_paths(receivers: AlertReceivers) -> None:
    notifier = RunAlertWebhookNotifier(http_conn_id=WEBHOOK_CONN_ID, event="overdue", options=OPTIONS)
    notifier.notify(_overdue_context("running"))
    asyncio.run(notifier.async_notify(_overdue_context("queued")))
    posts = receivers.webhook.posts
    assert [(path, post["event"], post["node_count"]) for path, _, post in posts] == [
        (WEBHOOK_PATH, "overdue", 2000),
        (WEBHOOK_PATH, "overdue", 2000),
    ]
    headers = posts[0][1]
    assert headers["Authorization"] == f"Bearer {WEBHOOK_TOKEN}", "the connection's extra goes as headers"
    assert posts[0][2]["subject"].startswith("[KAI scale] run ")
    assert "(2000 nodes) still running after" in posts[0][2]["subject"]
    assert "has not finished" in posts[0][2]["text"]


def test_the_mail_carries_the_alerts_subject_and_text(receivers: AlertReceivers) -> None:
    RunAlertEmailNotifier(to=RECIPIENT, event="overdue", options=OPTIONS, smtp_conn_id=SMTP_CONN_ID).notify(
        _overdue_context("running")
    )
    ((envelope, message),) = receivers.mailbox.messages
    assert (envelope.mail_from, envelope.rcpt_tos) == (SENDER, [RECIPIENT])
    assert str(message["Subject"]).startswith("[KAI scale] run ")
    assert "(2000 nodes) still running after" in str(message["Subject"])
    assert "has not finished" in text_of(html_body(message))


def test_a_run_that_finished_before_its_deadline_is_not_alerted(receivers: AlertReceivers) -> None:
    webhook = RunAlertWebhookNotifier(http_conn_id=WEBHOOK_CONN_ID, event="overdue", options=OPTIONS)
    mail = RunAlertEmailNotifier(to=RECIPIENT, event="overdue", options=OPTIONS, smtp_conn_id=SMTP_CONN_ID)
    webhook.notify(_overdue_context("success"))
    asyncio.run(webhook.async_notify(_overdue_context("failed")))
    mail.notify(_overdue_context("success"))
    assert (receivers.webhook.posts, receivers.mailbox.messages) == ([], [])
