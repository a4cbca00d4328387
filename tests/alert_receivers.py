"""Where alerts arrive in the tests: a real SMTP server (aiosmtpd) and a webhook (http.server).

They stand where a team's mail relay and chat webhook stand, and record what they receive.
"""

from __future__ import annotations

import email
import email.message
import html
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

SENDER = "kai-scale@example.com"
WEBHOOK_PATH = "/hooks/kai-scale"
WEBHOOK_TOKEN = "hook-token-1234"
# The ids of their Airflow connections (values.yaml documents them for a team's relay and hook).
SMTP_CONN_ID, WEBHOOK_CONN_ID = "alerts_smtp", "alerts_webhook"


@dataclass
class Mailbox:
    """What the SMTP server received."""

    port: int
    messages: list[tuple[Envelope, email.message.Message]] = field(default_factory=list)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        if not isinstance(envelope.content, bytes):  # a server started with decode_data=True
            raise TypeError(f"the mail's content is {type(envelope.content).__name__}, not bytes")
        self.messages.append((envelope, email.message_from_bytes(envelope.content)))
        return "250 Message accepted for delivery"


@dataclass
class Webhook:
    """What the webhook received: each POST's path, headers and JSON."""

    port: int
    posts: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)


@dataclass(frozen=True)
class AlertReceivers:
    """A mail server and a webhook listening on ``host``."""

    host: str
    mailbox: Mailbox
    webhook: Webhook

    def connections(self) -> dict[str, dict[str, Any]]:
        """The Airflow connections of both, by id: SMTP_CONN_ID and WEBHOOK_CONN_ID."""
        return {
            SMTP_CONN_ID: {
                "conn_type": "smtp",
                "host": self.host,
                "port": self.mailbox.port,
                "extra": {"from_email": SENDER, "disable_ssl": True, "disable_tls": True, "retry_limit": 0},
            },
            WEBHOOK_CONN_ID: {
                "conn_type": "http",
                "host": f"http://{self.host}:{self.webhook.port}{WEBHOOK_PATH}",
                "extra": {"Authorization": f"Bearer {WEBHOOK_TOKEN}"},
            },
        }


@contextmanager
def receiving_alerts(*, host: str, mail_port: int, webhook_port: int) -> Iterator[AlertReceivers]:
    """Both receivers, listening on ``host`` until the block ends."""
    mailbox = Mailbox(port=mail_port)
    with _mail_server(mailbox, host=host), _webhook_server(host=host, port=webhook_port) as webhook:
        yield AlertReceivers(host=host, mailbox=mailbox, webhook=webhook)


@contextmanager
def _mail_server(mailbox: Mailbox, *, host: str) -> Iterator[None]:
    controller = Controller(mailbox, hostname=host, port=mailbox.port)
    controller.start()
    try:
        yield
    finally:
        controller.stop()


@contextmanager
def _webhook_server(*, host: str, port: int) -> Iterator[Webhook]:
    received = Webhook(port=port)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            received.posts.append((self.path, dict(self.headers), json.loads(body)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()


def html_body(message: email.message.Message) -> str:
    """The mail's HTML part."""
    (part,) = [p for p in message.walk() if p.get_content_type() == "text/html"]
    payload = part.get_payload(decode=True)
    assert isinstance(payload, bytes)
    return payload.decode(part.get_content_charset() or "utf-8")


def text_of(body: str) -> str:
    """An HTML body's text, as its reader sees it."""
    return html.unescape(re.sub(r"<[^>]+>", "", body))
