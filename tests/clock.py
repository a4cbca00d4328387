"""A clock for code that takes ``monotonic`` and ``sleep``: time moves only when the code sleeps."""

from __future__ import annotations


class Clock:
    """Time that moves only when the code under test sleeps; the sleeps it asked for are kept."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
