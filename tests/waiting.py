"""Waiting on a condition with a deadline, instead of sleeping."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.2) -> T:
    """Return the first truthy result of ``probe``; at the deadline fail, naming ``what``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last value: {last!r})")


def free_ports(count: int) -> list[int]:
    """``count`` loopback ports nothing listens on right now (for a second local environment)."""
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports
