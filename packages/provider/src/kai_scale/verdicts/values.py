"""Reading a detail's value as a number: plain numbers, or Go duration strings as seconds."""

from __future__ import annotations

from kai_scale_model.durations import parse_duration


class DetailValueError(ValueError):
    """A value (a detail or a bound) that is neither a number nor a Go duration."""


def detail_number(value: object) -> float | None:
    """``value`` as a float (durations in seconds); None for values that are not measurements.

    Booleans and text that is not a duration (e.g. a ``message``) are not measurements.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return parse_duration(value).total_seconds()
        except ValueError:  # text that is no duration, e.g. a message
            return None
    return None


def bound_number(value: object, *, where: str) -> float:
    """A threshold bound as a float; raise DetailValueError naming ``where`` otherwise."""
    number = detail_number(value)
    if number is None:
        raise DetailValueError(f"{where}: must be a number or a duration like 6m30s, got {value!r}")
    return number
