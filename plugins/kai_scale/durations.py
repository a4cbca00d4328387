"""Durations written the way Go and Kubernetes users write them: ``90m``, ``1h30m``, ``45s``."""

from __future__ import annotations

import re
from datetime import timedelta

_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> timedelta:
    """Parse ``1h30m``-style text; raise ValueError naming the expected form."""
    compact = text.strip()
    parts = _PART.findall(compact)
    if not compact or "".join(number + unit for number, unit in parts) != compact:
        raise ValueError(f"must be a duration like 90m, 1h30m or 45s, got {text!r}")
    return timedelta(seconds=sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts))


def format_duration(value: timedelta) -> str:
    """Render as Go does for whole seconds (``1h30m0s``), the form the KAI dashboard reads."""
    total = int(value.total_seconds())
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{minutes}m{seconds}s"
    return f"{seconds}s"
