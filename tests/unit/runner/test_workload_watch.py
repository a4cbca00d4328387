"""What the workload does when the watch of its pods reports an error other than 410 Gone."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes_asyncio import client

from kai_scale_runner.workload import _after_watch_error


def test_a_watch_error_other_than_gone_ends_the_measurement_naming_it() -> None:
    """Only 410 is resumed from a fresh list; any other error must not be re-watched in a loop.

    The client is never called on this path: it points at no server.
    """
    status = {"code": 500, "reason": "InternalError", "message": "etcdserver: request timed out"}
    scheduled_at: dict[str, float] = {}

    async def handle() -> str:
        async with client.ApiClient() as api:
            return await _after_watch_error(
                client.CoreV1Api(api),
                namespace="kai-scale",
                selector="a=b",
                status=status,
                scheduled_at=scheduled_at,
            )

    with pytest.raises(
        RuntimeError, match=r"watching the workload's pods failed: 500 InternalError: etcdserver"
    ):
        asyncio.run(handle())
    assert scheduled_at == {}
