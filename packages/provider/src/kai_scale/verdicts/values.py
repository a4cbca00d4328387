"""Reading a detail's value as a number: plain numbers, or Go duration strings as seconds."""

from __future__ import annotations

import durationpy


class DetailValueError(ValueError):
    """A value (a detail or a bound) that is neither a number nor a Go duration."""


def detail_number(value: object, *, where: str) -> float | None:
    """``value`` as a float (durations in seconds); None for values that are not measurements.

    Booleans and text that is not a duration (e.g. a ``message``) are not measurements.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(durationpy.from_str(value).total_seconds())
        except Exception:  # durationpy raises its own and ValueError for text that is no duration
            return None
    return None


def bound_number(value: object, *, where: str) -> float:
    """A threshold bound as a float; raise DetailValueError naming ``where`` otherwise."""
    number = detail_number(value, where=where)
    if number is None:
        raise DetailValueError(f"{where}: must be a number or a duration like 6m30s, got {value!r}")
    return number
