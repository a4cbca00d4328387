"""The Pyroscope client's requests and its reading of answers.

Pyroscope itself runs in the cluster (the deployment's nights read KAI's profiles from it); here a
stand-in HTTP server on loopback answers as Pyroscope's Connect API does, so that what is sent and each
kind of refusal can be checked.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from kai_scale.profiles.pyroscope_api import (
    SELECT_MERGE_PROFILE,
    PyroscopeClient,
    PyroscopeError,
    select_merge_profile_request,
)
from tests.waiting import free_ports

START = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
END = datetime(2026, 11, 22, 2, 1, 30, 500_000, tzinfo=UTC)
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"


def _varint(value: int) -> bytes:
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def test_the_request_is_select_merge_profile_of_the_service_over_the_window_in_milliseconds() -> None:
    """The bytes protobuf's wire format gives fields 1-4 of querier.v1.SelectMergeProfileRequest."""
    selector = b'{service_name="kai-scheduler"}'
    expected = (
        b"\x0a" + _varint(len(CPU)) + CPU.encode()
        + b"\x12" + _varint(len(selector)) + selector
        + b"\x18" + _varint(1_795_312_800_000)
        + b"\x20" + _varint(1_795_312_890_500)
    )  # fmt: skip
    assert select_merge_profile_request(profile_type=CPU, service="kai-scheduler", start=START, end=END) == (
        expected
    )


class _Pyroscope(BaseHTTPRequestHandler):
    """Answers as the server's class attributes say, and keeps what it was sent."""

    status = 200
    body = b"profile bytes"
    received: ClassVar[list[tuple[str, dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        self.received.append((self.path, dict(self.headers), self.rfile.read(length)))
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def pyroscope() -> Iterator[tuple[str, type[_Pyroscope]]]:
    handler = type("Handler", (_Pyroscope,), {"received": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_the_answer_is_the_profile_as_pyroscope_sent_it(pyroscope: tuple[str, type[_Pyroscope]]) -> None:
    url, handler = pyroscope
    with PyroscopeClient(url) as client:
        data = client.merged_profile(profile_type=CPU, service="kai-scheduler", start=START, end=END)
    assert data == b"profile bytes"
    ((path, headers, body),) = handler.received
    assert path == SELECT_MERGE_PROFILE
    assert headers["Content-Type"] == "application/proto"
    assert body == select_merge_profile_request(
        profile_type=CPU, service="kai-scheduler", start=START, end=END
    )


def test_a_refusal_names_the_profile_the_service_and_pyroscopes_reason(
    pyroscope: tuple[str, type[_Pyroscope]],
) -> None:
    url, handler = pyroscope
    handler.status = 400
    handler.body = json.dumps({"code": "invalid_argument", "message": "unknown profile type"}).encode()
    with PyroscopeClient(url) as client, pytest.raises(PyroscopeError) as refused:
        client.merged_profile(profile_type="nope", service="kai-scheduler", start=START, end=END)
    assert str(refused.value) == (
        f"Pyroscope at {url} refused the nope profile of kai-scheduler: HTTP 400: "
        "invalid_argument: unknown profile type"
    )
    assert not refused.value.unreachable


def test_an_answer_that_is_not_connects_is_quoted(pyroscope: tuple[str, type[_Pyroscope]]) -> None:
    url, handler = pyroscope
    handler.status = 502
    handler.body = b"<html>Bad Gateway</html>"
    with PyroscopeClient(url) as client, pytest.raises(PyroscopeError, match="HTTP 502: '<html>Bad Gateway"):
        client.merged_profile(profile_type=CPU, service="kai-scheduler", start=START, end=END)


def test_a_closed_port_is_unreachable() -> None:
    (port,) = free_ports(1)
    with PyroscopeClient(f"http://127.0.0.1:{port}") as client, pytest.raises(PyroscopeError) as failed:
        client.merged_profile(profile_type=CPU, service="kai-scheduler", start=START, end=END)
    assert str(failed.value).startswith(f"Pyroscope at http://127.0.0.1:{port} is unreachable: ")
    assert failed.value.unreachable


def test_a_pyroscope_that_does_not_answer_in_time_is_said_slow_not_unreachable() -> None:
    """A server that accepts the connection and never answers: the error says how long was waited."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with PyroscopeClient(url, timeout_seconds=0.5) as client, pytest.raises(PyroscopeError) as failed:
            client.merged_profile(profile_type=CPU, service="kai-scheduler", start=START, end=END)
    assert str(failed.value) == (
        f"Pyroscope at {url} did not answer within 0.5 s (ReadTimeout): "
        "too slow to ask for more profiles this run"
    )
    assert failed.value.unreachable


def test_a_pyroscope_whose_connections_time_out_is_unreachable() -> None:
    """A listening socket whose accept queue is full: the kernel drops the next connection's SYN."""
    with socket.create_server(("127.0.0.1", 0), backlog=0) as full:
        port = full.getsockname()[1]
        queued = [socket.socket() for _ in range(3)]
        for waiting in queued:
            waiting.setblocking(False)
            waiting.connect_ex(("127.0.0.1", port))
        try:
            client = PyroscopeClient(f"http://127.0.0.1:{port}", timeout_seconds=0.5)
            with client, pytest.raises(PyroscopeError) as failed:
                client.merged_profile(profile_type=CPU, service="kai-scheduler", start=START, end=END)
        finally:
            for waiting in queued:
                waiting.close()
    assert str(failed.value) == f"Pyroscope at http://127.0.0.1:{port} is unreachable: timed out"
    assert failed.value.unreachable
