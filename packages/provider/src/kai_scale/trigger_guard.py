"""The API server refuses a trigger of the nightly DAG whose conf has a key the DAG does not know.

Airflow checks each known param's value when a run is triggered, but merges unknown keys into the run
unchecked (``kai_scale.params``), so ``{"node_cout": 50}`` would start a 500-node night. This ASGI
middleware, which the plugin puts in front of Airflow's API, answers such a trigger 400 naming the key,
as Airflow answers a bad value; any other request passes untouched. It imports no web framework: every
Airflow process loads the plugin, only the API server calls it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from kai_scale.params import unknown_params_problem

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class UnknownParamsRefused:
    """ASGI middleware: ``POST /api/v2/dags/<dag_id>/dagRuns`` with an unknown conf key gets 400."""

    def __init__(self, app: ASGIApp, *, dag_id: str) -> None:
        self.app = app
        self.trigger_path = f"/api/v2/dags/{dag_id}/dagRuns"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a trigger naming an unknown key with 400; hand everything else to Airflow's API."""
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or scope["path"].rstrip("/") != self.trigger_path
        ):
            await self.app(scope, receive, send)
            return
        received = [await receive()]
        while received[-1]["type"] == "http.request" and received[-1].get("more_body"):
            received.append(await receive())
        problem = _problem(b"".join(m.get("body", b"") for m in received if m["type"] == "http.request"))
        if problem is not None:
            body = json.dumps({"detail": problem}).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 400, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return

        async def replay() -> Message:
            # The body read above goes to Airflow's API first, then whatever the client sends next.
            return received.pop(0) if received else await receive()

        await self.app(scope, replay, send)


def _problem(body: bytes) -> str | None:
    try:
        conf = json.loads(body).get("conf") if body else None
    except (ValueError, AttributeError):
        return None  # not a JSON object: Airflow's API answers that itself
    return unknown_params_problem(conf) if isinstance(conf, dict) else None


def middleware_entry(*, dag_id: str) -> dict[str, Any]:
    """The plugin's ``fastapi_root_middlewares`` entry for the DAG ``dag_id``."""
    return {
        "middleware": UnknownParamsRefused,
        "args": [],
        "kwargs": {"dag_id": dag_id},
        "name": "kai_scale unknown params refused at trigger",
    }
