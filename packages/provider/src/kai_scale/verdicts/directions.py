"""Which way is worse for a detail, and how large a change matters: data with defaults. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def rules_from_scenario(
    entries: Sequence[Mapping[str, object]], *, where: str
) -> dict[tuple[str, str], DetailRule]:
    """A scenario's ``detail_rules:`` (``test_name``, ``detail``, ``better``, optional ``min_change``).

    Raise ValueError naming ``where`` and the entry when one is not of that shape.
    """
    rules = {}
    for index, entry in enumerate(entries):
        better, min_change = entry.get("better"), entry.get("min_change", DEFAULT_MIN_CHANGE)
        if better not in ("lower", "higher") or not isinstance(min_change, int | float) or min_change < 0:
            raise ValueError(
                f"{where}: detail_rules[{index}]: 'better' must be lower or higher and 'min_change' a "
                f"non-negative fraction (0.05 = 5 %), got {better!r} and {min_change!r}"
            )
        rules[(str(entry["test_name"]), str(entry["detail"]))] = DetailRule(
            better="lower" if better == "lower" else "higher", min_change=float(min_change)
        )
    return rules
