"""Which way is worse for a detail, and how large a change matters: data with defaults. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kai_scale.verdicts.change_points import Better

# Details whose names say they are rates are better higher; times, latencies, counts of failures lower.
HIGHER_IS_BETTER_WORDS = ("throughput", "per second", "/s", "pods_per_second", "rate")
DEFAULT_MIN_CHANGE = 0.05


@dataclass(frozen=True, kw_only=True)
class DetailRule:
    """How one detail is judged."""

    better: Better
    """``lower`` or ``higher``."""
    min_change: float = DEFAULT_MIN_CHANGE
    """Relative change (0.05 = 5 %) below which nothing is flagged."""


def default_rule(detail: str) -> DetailRule:
    """``higher`` for details named as rates (pods/s, throughput), else ``lower``."""
    name = detail.lower()
    return DetailRule(better="higher" if any(word in name for word in HIGHER_IS_BETTER_WORDS) else "lower")


def rule_for(test_name: str, detail: str, *, overrides: Mapping[tuple[str, str], DetailRule]) -> DetailRule:
    """A scenario's rule for (test, detail) when it sets one, else the default."""
    return overrides.get((test_name, detail)) or default_rule(detail)
