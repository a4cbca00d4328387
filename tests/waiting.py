"""Waiting on a condition with a deadline, instead of sleeping: the pipeline's helper, failing as a test."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import TypeVar

from kai_scale_model import waiting

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.2) -> T:
    """Return the first truthy result of ``probe``; at the deadline fail, naming ``what``."""
    found = waiting.wait_for(
        probe,
        until=bool,
        what=what,
        timeout=timeout,
        interval=interval,
        error=lambda last: AssertionError(
            f"timed out after {timeout:.0f} s waiting for {what} (last value: {last!r})"
        ),
    )
    assert found is not None  # truthy: what was waited for
    return found


def free_ports(count: int) -> list[int]:
    """``count`` loopback ports nothing listens on right now (for a second local environment)."""
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports
