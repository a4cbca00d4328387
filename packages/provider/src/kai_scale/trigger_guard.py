"""The API server refuses a trigger of the nightly DAG whose conf has a key the DAG does not know.

Airflow checks each known param's value when a run is triggered, but merges unknown keys into the run
unchecked (``kai_scale.params``), so ``{"node_cout": 50}`` would start a 500-node night. This ASGI
middleware, which the plugin puts in front of Airflow's API, answers such a trigger (or a backfill of
the DAG) 400 naming the key, as Airflow answers a bad value; any other request passes untouched. It
answers before Airflow authenticates the request: what it tells is the DAG's param names, which its
trigger form shows anyway. It imports no web framework: every Airflow process loads the plugin, only
the API server calls it.
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

# Where a run's conf comes in: a trigger's ``conf``, a backfill's ``dag_run_conf`` (for every run it makes).
BACKFILL_PATHS = ("/api/v2/backfills", "/api/v2/backfills/dry_run")


class UnknownParamsRefused:
    """ASGI middleware: a trigger or backfill of ``dag_id`` whose conf has an unknown key gets 400."""

    def __init__(self, app: ASGIApp, *, dag_id: str) -> None:
        self.app = app
        self.dag_id = dag_id
        self.trigger_path = f"/api/v2/dags/{dag_id}/dagRuns"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a run conf naming an unknown key with 400; hand everything else to Airflow's API."""
        path = _route_path(scope)
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or path not in (self.trigger_path, *BACKFILL_PATHS)
        ):
            await self.app(scope, receive, send)
            return
        received = [await receive()]
        while received[-1]["type"] == "http.request" and received[-1].get("more_body"):
            received.append(await receive())
        body = b"".join(m.get("body", b"") for m in received if m["type"] == "http.request")
        problem = self._problem(path, body)
        if problem is not None:
            answer = json.dumps({"detail": problem}).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]
            await send({"type": "http.response.start", "status": 400, "headers": headers})
            await send({"type": "http.response.body", "body": answer})
            return

        async def replay() -> Message:
            # The body read above goes to Airflow's API first, then whatever the client sends next.
            return received.pop(0) if received else await receive()

        await self.app(scope, replay, send)

    def _problem(self, path: str, body: bytes) -> str | None:
        try:
            request = json.loads(body) if body else None
        except ValueError:
            return None  # not JSON: Airflow's API answers that itself
        if not isinstance(request, dict):
            return None
        if path == self.trigger_path:
            conf = request.get("conf")
        elif request.get("dag_id") == self.dag_id:
            conf = request.get("dag_run_conf")
        else:
            return None
        return unknown_params_problem(conf) if isinstance(conf, dict) else None


def _route_path(scope: Scope) -> str:
    """The request's path below the API server's base URL (``[api] base_url``), as Airflow routes it."""
    path, root = str(scope.get("path", "")), str(scope.get("root_path", ""))
    return path[len(root) :] if root and path.startswith(root) else path


def middleware_entry(*, dag_id: str) -> dict[str, Any]:
    """The plugin's ``fastapi_root_middlewares`` entry for the DAG ``dag_id``."""
    return {
        "middleware": UnknownParamsRefused,
        "args": [],
        "kwargs": {"dag_id": dag_id},
        "name": "kai_scale unknown params refused at trigger",
    }
