"""Waiting for a condition with a deadline: the one helper behind every wait of the pipeline and localenv.

A probe is asked at once, then every ``interval`` seconds, until what it answers is what is waited for;
once ``timeout`` seconds have passed, the caller's error is raised from the last answer, so that it can
say what was seen. The clock and the sleep are parameters: tests pass their own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

Answer = TypeVar("Answer")


class WaitTimeout(TimeoutError):
    """What was waited for did not come in time; the message says what, for how long, and what was seen."""


@dataclass(frozen=True, kw_only=True)
class Deadline:
    """A moment ``seconds`` from when it is made, on ``clock``."""

    seconds: float
    """How long from now."""
    clock: Callable[[], float] = time.monotonic
    """Monotonic seconds."""
    at: float = field(init=False)
    """The moment, on ``clock``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "at", self.clock() + self.seconds)

    def remaining(self) -> float:
        """Seconds left (negative once passed)."""
        return self.at - self.clock()

    def passed(self) -> bool:
        """Whether the moment has come."""
        return self.remaining() <= 0


def _timed_out(what: str, timeout: float, answer: object) -> WaitTimeout:
    return WaitTimeout(f"{what}: not within {timeout:.0f} s (last seen: {answer!r})")


def wait_for(
    probe: Callable[[], Answer],
    *,
    until: Callable[[Answer], bool],
    what: str,
    timeout: float,
    interval: float,
    error: Callable[[Answer], Exception] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Answer:
    """Ask ``probe`` until ``until`` holds of its answer, and return that answer.

    :param until: whether an answer is what is waited for.
    :param what: what is waited for, for the default error ("KAI's scheduler serving").
    :param timeout: seconds; the probe is asked at least once, and once more after the last sleep.
    :param interval: seconds between two probes.
    :param error: the error to raise at the deadline, from the last answer; default ``WaitTimeout``.
    """
    deadline = Deadline(seconds=timeout, clock=clock)
    while True:
        answer = probe()
        if until(answer):
            return answer
        if deadline.passed():
            raise error(answer) if error else _timed_out(what, timeout, answer)
        sleep(interval)


async def wait_for_async(
    probe: Callable[[], Awaitable[Answer]],
    *,
    until: Callable[[Answer], bool],
    what: str,
    timeout: float,
    interval: float,
    error: Callable[[Answer], Exception] | None = None,
) -> Answer:
    """``wait_for`` with a probe to await, sleeping without blocking the event loop."""
    deadline = Deadline(seconds=timeout)
    while True:
        answer = await probe()
        if until(answer):
            return answer
        if deadline.passed():
            raise error(answer) if error else _timed_out(what, timeout, answer)
        await asyncio.sleep(interval)
