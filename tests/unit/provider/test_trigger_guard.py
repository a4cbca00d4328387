"""The API server's check of the nightly DAG's triggers, driven as an ASGI server drives it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kai_scale.trigger_guard import Message, Scope, UnknownParamsRefused

TRIGGER = "/api/v2/dags/kai_scale_nightly/dagRuns"


class AirflowApiStandIn:
    """The app behind the middleware: answers 200 with the body it received."""

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})


def _request(method: str, path: str, chunks: list[bytes], root_path: str = "") -> tuple[int, bytes]:
    scope = {"type": "http", "method": method, "path": root_path + path, "root_path": root_path}
    incoming = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(UnknownParamsRefused(AirflowApiStandIn(), dag_id="kai_scale_nightly")(scope, receive, send))
    return int(sent[0]["status"]), b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.parametrize("root_path", ["", "/airflow"])  # [api] base_url with a path: Airflow's root_path
def test_a_trigger_with_an_unknown_key_is_refused_naming_it(root_path: str) -> None:
    request = json.dumps({"conf": {"node_cout": 50, "scenarios": ["x"]}}).encode()
    status, body = _request("POST", TRIGGER, [request], root_path=root_path)
    assert status == 400
    known = "kai_ref, node_count, runner_tag, scenarios"
    assert json.loads(body) == {"detail": f"unknown param(s) 'node_cout'; the DAG's params are {known}"}


@pytest.mark.parametrize("path", ["/api/v2/backfills", "/api/v2/backfills/dry_run"])
def test_a_backfill_of_the_dag_with_an_unknown_key_is_refused(path: str) -> None:
    backfill = {
        "dag_id": "kai_scale_nightly",
        "from_date": "2026-11-01T00:00:00Z",
        "dag_run_conf": {"nodes": 5},
    }
    status, body = _request("POST", path, [json.dumps(backfill).encode()])
    assert status == 400
    assert json.loads(body)["detail"].startswith("unknown param(s) 'nodes'")


@pytest.mark.parametrize(
    ("method", "path", "conf"),
    [
        ("POST", TRIGGER, {"node_count": 50}),  # known keys: Airflow checks their values
        ("POST", TRIGGER, None),  # no conf: the defaults
        ("POST", "/api/v2/dags/another_dag/dagRuns", {"anything": 1}),  # other DAGs keep their conf free
        ("PATCH", TRIGGER, {"node_cout": 50}),
    ],
)
def test_other_requests_reach_airflow_with_their_body_whole(method: str, path: str, conf: Any) -> None:
    body = json.dumps({"logical_date": None, "conf": conf}).encode()
    # Sent in two chunks, as a server may deliver it: Airflow must get every byte.
    status, echoed = _request(method, path, [body[:10], body[10:]])
    assert (status, echoed) == (200, body)


def test_another_dags_backfill_reaches_airflow() -> None:
    backfill = json.dumps({"dag_id": "another_dag", "dag_run_conf": {"anything": 1}}).encode()
    assert _request("POST", "/api/v2/backfills", [backfill]) == (200, backfill)


def test_a_body_that_is_not_json_is_left_to_airflow() -> None:
    assert _request("POST", TRIGGER, [b"not json"]) == (200, b"not json")
