"""The one waiting helper: asked at once, then every interval; at the deadline, the caller's error."""

from __future__ import annotations

import asyncio

import pytest

from kai_scale_model.waiting import Deadline, WaitTimeout, wait_for, wait_for_async
from tests.clock import Clock


def test_the_answer_that_holds_is_returned_after_as_many_sleeps_as_probes_before_it() -> None:
    answers, clock = iter([3, 1, 0]), Clock()
    held = wait_for(
        lambda: next(answers),
        until=lambda n: n == 0,
        what="nothing held",
        timeout=60,
        interval=2,
        clock=clock,
        sleep=clock.sleep,
    )
    assert (held, clock.sleeps) == (0, [2, 2])


def test_at_the_deadline_the_callers_error_is_raised_from_the_last_answer() -> None:
    clock = Clock()
    with pytest.raises(RuntimeError, match=r"^4 still held$"):
        wait_for(
            lambda: 4,
            until=lambda n: n == 0,
            what="nothing held",
            timeout=10,
            interval=3,
            error=lambda n: RuntimeError(f"{n} still held"),
            clock=clock,
            sleep=clock.sleep,
        )
    assert clock.sleeps == [3] * 4  # asked at 0, 3, 6, 9 and 12 s: past the deadline, it fails


def test_without_an_error_of_its_own_the_timeout_says_what_and_what_was_seen() -> None:
    with pytest.raises(WaitTimeout, match=r"^KAI serving: not within 0 s \(last seen: 'pending'\)$"):
        wait_for(lambda: "pending", until=lambda s: s == "ready", what="KAI serving", timeout=0, interval=1)


def test_the_async_twin_awaits_its_probe_and_raises_the_same_way() -> None:
    answers = iter([[1], []])

    async def probe() -> list[int]:
        return next(answers)

    assert asyncio.run(wait_for_async(probe, until=lambda p: not p, what="gone", timeout=5, interval=0)) == []

    async def never() -> list[int]:
        return [1]

    with pytest.raises(WaitTimeout, match=r"^gone: not within 0 s"):
        asyncio.run(wait_for_async(never, until=lambda p: not p, what="gone", timeout=0, interval=0))


def test_a_deadline_counts_down_on_its_clock() -> None:
    clock = Clock()
    deadline = Deadline(seconds=5, clock=clock)
    assert (deadline.remaining(), deadline.passed()) == (5, False)
    clock.sleep(5)
    assert (deadline.remaining(), deadline.passed()) == (0, True)
