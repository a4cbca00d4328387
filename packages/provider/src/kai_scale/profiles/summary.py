"""A profile's total and top functions for one sample type: what the results say of a profile. Pure.

Flat and cumulative as ``go tool pprof`` counts them: a function's flat value is that of the samples
whose leaf frame it is; its cumulative value that of the samples with it anywhere on the stack,
counted once per sample even when it recurses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from kai_scale.profiles.pprof import Profile, ValueType
from kai_scale_model.validation import StrictModel

# Go's CPU profiles have the sample types samples/count and cpu/nanoseconds.
CPU_SAMPLE_TYPE: Final = "cpu"
CPU_UNIT: Final = "nanoseconds"
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, kw_only=True)
class FunctionValues:
    """One sample type's value per function, for every function of a profile (not only a top N)."""

    sample_type: ValueType
    total: int
    """The sum over all samples, whatever their stack."""
    flat: Mapping[str, int]
    """Per function, its flat value; functions whose value is 0 are left out."""
    cumulative: Mapping[str, int]
    """Per function, its cumulative value; functions whose value is 0 are left out."""

    def share(self, value: int) -> float:
        """``value`` as a share of the total (0..1); 0 when the total is 0."""
        return value / self.total if self.total else 0.0


def function_values(profile: Profile, sample_type: str) -> FunctionValues:
    """The values of ``sample_type`` (e.g. ``cpu``, ``inuse_space``) per function of ``profile``.

    :raises ProfileError: when the profile has no such sample type (naming those it has).
    """
    index = profile.value_index(sample_type)
    total = 0
    flat: Counter[str] = Counter()
    cumulative: Counter[str] = Counter()
    for sample in profile.samples:
        value = sample.values[index]
        total += value
        if not value or not sample.stack:
            continue
        flat[sample.stack[0]] += value
        for function in set(sample.stack):
            cumulative[function] += value
    return FunctionValues(
        sample_type=profile.sample_types[index], total=total, flat=dict(flat), cumulative=dict(cumulative)
    )


class FunctionShare(StrictModel):
    """One function's value of a sample type, and its share of the profile's total."""

    function: str
    value: int
    """In the sample type's unit."""
    share: float
    """``value`` / the profile's total: 0..1 (0 when the total is 0)."""


class ProfileSummary(StrictModel):
    """One sample type of a profile: its total and the functions that account for most of it.

    A window without samples is a summary with total 0 and empty lists, which the caller reports.
    """

    sample_type: str
    """E.g. ``cpu``, ``alloc_space``, ``inuse_objects``."""
    unit: str
    """The unit of ``total`` and of the functions' values, e.g. ``nanoseconds``, ``bytes``, ``count``."""
    total: int
    cpu_seconds: float | None
    """For a CPU profile (sample type ``cpu`` in nanoseconds), ``total`` in seconds; None otherwise."""
    window_start: datetime | None
    """When the profile's window started (UTC); None when the profile does not say."""
    window_seconds: float | None
    """The window's length; None when the profile does not say (Go's heap profiles do not)."""
    top_flat: list[FunctionShare]
    """The functions of the largest flat values, largest first."""
    top_cumulative: list[FunctionShare]
    """The functions of the largest cumulative values, largest first."""


def summarize(profile: Profile, sample_type: str, *, top: int = 10) -> ProfileSummary:
    """The summary of ``sample_type`` in ``profile``, with ``top`` functions per list.

    :raises ProfileError: when the profile has no such sample type (naming those it has).
    """
    values = function_values(profile, sample_type)
    unit = values.sample_type.unit
    is_cpu = sample_type == CPU_SAMPLE_TYPE and unit == CPU_UNIT
    return ProfileSummary(
        sample_type=sample_type,
        unit=unit,
        total=values.total,
        cpu_seconds=values.total / 1e9 if is_cpu else None,
        window_start=_EPOCH + timedelta(microseconds=profile.time_nanos // 1000)
        if profile.time_nanos
        else None,
        window_seconds=profile.duration_nanos / 1e9 if profile.duration_nanos else None,
        top_flat=_top(values.flat, values, top),
        top_cumulative=_top(values.cumulative, values, top),
    )


def _top(by_function: Mapping[str, int], values: FunctionValues, count: int) -> list[FunctionShare]:
    # Largest first; ties by name, so the same profile always gives the same list.
    ranked = sorted(by_function.items(), key=lambda item: (-item[1], item[0]))[:count]
    return [FunctionShare(function=name, value=value, share=values.share(value)) for name, value in ranked]
