"""Durations written the way Go and Kubernetes users write them: ``90m``, ``1h30m``, ``45s``.

Parsing is ``durationpy``'s: Go's grammar, more lenient (it also takes ``d``, ``w`` and ``y`` units and
spaces between parts); this module keeps the one error message a user sees for every duration field.
"""

from __future__ import annotations

from datetime import timedelta

import durationpy


def parse_duration(text: str) -> timedelta:
    """Parse ``1h30m``-style text; raise ValueError naming the expected form."""
    try:
        return durationpy.from_str(text.strip())
    except durationpy.DurationError:
        raise ValueError(f"must be a duration like 90m, 1h30m or 45s, got {text!r}") from None


def format_duration(value: timedelta) -> str:
    """Render in the same grammar (``1h30m``), so a value round-trips through ``parse_duration``."""
    return str(durationpy.to_str(value))
