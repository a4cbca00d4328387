"""The pipeline's alerts as notifiers: the SMTP and HTTP providers' notifiers, given our message.

Each builds the alert when it is called (``kai_scale.alerts``) and leaves the sending to the provider's
notifier: its hook, its connection, its sync path (a DAG's ``on_failure_callback``, run in the
dag-processor) and its async path (a deadline's callback, run in the triggerer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from airflow.providers.http.notifications.http import HttpNotifier
from airflow.providers.smtp.notifications.smtp import SmtpNotifier
from airflow.sdk.bases.notifier import BaseNotifier

from kai_scale.alerts.message import Alert
from kai_scale.alerts.run_records import Event, run_alert

if TYPE_CHECKING:
    from airflow.sdk.definitions.context import Context


class _RunAlertNotifier(BaseNotifier):
    """What every channel does: build the run's alert, or say nothing for a run already finished.

    The sending is the provider's notifier's, next in the method resolution order.
    """

    event: Event
    options: dict[str, Any]

    def _apply(self, alert: Alert) -> None:
        """Give the alert to the provider's notifier (its subject and body, or its JSON)."""
        raise NotImplementedError

    def _prepare(self, context: Context) -> bool:
        alert = run_alert(context, event=self.event, options=self.options)
        if alert is None:
            self.log.info("run already finished: no %s alert", self.event)
            return False
        self._apply(alert)
        return True

    def notify(self, context: Context) -> None:
        """Send the alert (sync, in the dag-processor)."""
        if self._prepare(context):
            super().notify(context)

    async def async_notify(self, context: Context) -> None:
        """Send the alert (async, in the triggerer)."""
        if self._prepare(context):
            await super().async_notify(context)


class RunAlertEmailNotifier(_RunAlertNotifier, SmtpNotifier):
    """Mails the pipeline's alert about a failed or overdue DAG run, through an SMTP connection.

    The body is the alert's plain text, preformatted (the SMTP hook sends HTML bodies only).

    :param to: the recipients.
    :param event: ``failed`` (as the DAG's ``on_failure_callback``) or ``overdue`` (as a deadline's).
    :param options: ``kai_scale.alerts.run_records.AlertOptions.as_kwargs()``.
    :param smtp_conn_id: the SMTP connection (default: ``[email] email_conn_id``, else ``smtp_default``).
    :param from_email: the sender (default: the connection's ``from_email``).
    """

    def __init__(
        self,
        *,
        to: str | Iterable[str],
        event: Event = "failed",
        options: Mapping[str, Any],
        smtp_conn_id: str | None = None,
        from_email: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(to=to, from_email=from_email, smtp_conn_id=smtp_conn_id, **kwargs)
        self.event: Event = event
        self.options = dict(options)

    def _apply(self, alert: Alert) -> None:
        self.subject, self.html_content = alert.subject, alert.html()


class RunAlertWebhookNotifier(_RunAlertNotifier, HttpNotifier):
    """Posts the pipeline's alert about a failed or overdue DAG run as JSON to a webhook.

    The JSON holds the subject, the whole text (``text``: what chat webhooks show) and every item
    as data; see ``kai_scale.alerts.message``.

    :param http_conn_id: an HTTP connection whose host is the webhook's URL (headers in its extra).
    :param event: ``failed`` (as the DAG's ``on_failure_callback``) or ``overdue`` (as a deadline's).
    :param options: ``kai_scale.alerts.run_records.AlertOptions.as_kwargs()``.
    """

    def __init__(
        self, *, http_conn_id: str, event: Event = "failed", options: Mapping[str, Any], **kwargs: Any
    ) -> None:
        super().__init__(http_conn_id=http_conn_id, method="POST", **kwargs)
        self.event: Event = event
        self.options = dict(options)

    def _apply(self, alert: Alert) -> None:
        self.json = alert.payload
