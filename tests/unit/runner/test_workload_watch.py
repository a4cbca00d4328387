"""What the workload's watch of its pods does when the API server sends an error other than 410 Gone."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from typing import Any

import pytest
from kubernetes_asyncio import client

from kai_scale_model.waiting import Deadline
from kai_scale_runner.workload import _watch_bindings

ERROR_EVENT = {
    "type": "ERROR",
    "object": {
        "kind": "Status",
        "code": 500,
        "reason": "InternalError",
        "message": "etcdserver: request timed out",
    },
}


class _WatchThatFails(http.server.BaseHTTPRequestHandler):
    """Answers every watch of pods with one ERROR event, as an API server whose etcd timed out does.

    A stand-in: a real API server cannot be made to send that event on demand.
    """

    watches = 0

    def do_GET(self) -> None:
        type(self).watches += 1
        body = json.dumps(ERROR_EVENT).encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


def test_a_watch_error_other_than_gone_ends_the_measurement_naming_it() -> None:
    """Only 410 is resumed from a fresh list; any other error is raised after one watch, never re-watched."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _WatchThatFails)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    scheduled_at: dict[str, float] = {}

    async def watch() -> None:
        configuration = client.Configuration(host=f"http://127.0.0.1:{server.server_port}")
        async with client.ApiClient(configuration) as api:
            await _watch_bindings(
                core=client.CoreV1Api(api),
                namespace="kai-scale",
                selector="kai-scale.dev/run-id=r1",
                resource_version="1",
                scheduled_at=scheduled_at,
                expected=1,
                deadline=Deadline(seconds=30),
            )

    try:
        with pytest.raises(
            RuntimeError, match=r"watching the workload's pods failed: 500 InternalError: etcdserver"
        ):
            asyncio.run(watch())
    finally:
        server.shutdown()
        server.server_close()
    assert _WatchThatFails.watches == 1
    assert scheduled_at == {}
