"""Which way is worse for a detail, and how large a change matters: data with defaults. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kai_scale.verdicts.change_points import Better

# Whole words of a detail's name (``generated`` holds no ``rate``); ``/s`` counts as a word.
_WORDS = re.compile(r"[a-z]+|/s\b")
# Rates and throughputs are better higher; times and latencies lower.
HIGHER_IS_BETTER_WORDS = frozenset({"throughput", "rate", "/s", "qps"})
# ...unless they count what went wrong: an error rate is better lower.
WORSE_WORDS = frozenset({"error", "errors", "failure", "failures", "failed"})
DEFAULT_MIN_CHANGE = 0.05


@dataclass(frozen=True, kw_only=True)
class DetailRule:
    """How one detail is judged."""

    better: Better
    """``lower`` or ``higher``."""
    min_change: float = DEFAULT_MIN_CHANGE
    """Relative change (0.05 = 5 %) below which nothing is flagged."""
    judge: bool = True
    """False for a detail that is a setting or a size, not a measurement (``pods``, ``gpus per pod``)."""


def default_rule(detail: str) -> DetailRule:
    """``higher`` for details named as rates (pods/s, throughput, rate), else ``lower``."""
    words = set(_WORDS.findall(detail.lower())) | ({"/s"} if "per second" in detail.lower() else set())
    higher = bool(words & HIGHER_IS_BETTER_WORDS) and not words & WORSE_WORDS
    return DetailRule(better="higher" if higher else "lower")


def rule_for(test_name: str, detail: str, *, overrides: Mapping[tuple[str, str], DetailRule]) -> DetailRule:
    """A scenario's rule for (test, detail) when it sets one, else the default."""
    return overrides.get((test_name, detail)) or default_rule(detail)
