"""A run's CPU profile of the scheduler against a baseline run's: where the CPU went differently. Pure.

Shares, not absolute values, name the functions: a run that scheduled more pods spends more CPU
everywhere, and what a regression changes is where the CPU goes. The absolute change is CPU per
scheduled pod, when the pod counts are known.
"""

from __future__ import annotations

from collections.abc import Mapping

from kai_scale.profiles.pprof import Profile, ProfileError
from kai_scale.profiles.summary import CPU_SAMPLE_TYPE, CPU_UNIT, FunctionValues, function_values
from kai_scale_model.validation import StrictModel


class ShareChange(StrictModel):
    """One function's share of the CPU in the baseline and in the run."""

    function: str
    baseline_share: float
    """0..1 of the baseline's CPU; 0 when the function has no CPU there."""
    run_share: float
    """0..1 of the run's CPU; 0 when the function has no CPU there."""
    change_points: float
    """``run_share - baseline_share`` in percentage points (12.4 is +12.4 pp)."""


class ProfileComparison(StrictModel):
    """The scheduler's CPU in a run against a baseline run: totals, per pod, and the shares that moved.

    ``cumulative_*`` compare cumulative shares (a function and what it calls), ``flat_*`` flat shares
    (the function's own code); ``*_grew`` lists the largest increases first, ``*_shrank`` the largest
    decreases first, only functions whose share changed. All four are empty when either profile has no
    CPU samples: there are no shares to compare.
    """

    baseline_run_id: str
    run_cpu_seconds: float
    baseline_cpu_seconds: float
    run_cpu_seconds_per_pod: float | None
    """CPU seconds per pod the run scheduled; None without its pod count (or with 0 pods)."""
    baseline_cpu_seconds_per_pod: float | None
    """CPU seconds per pod the baseline scheduled; None without its pod count (or with 0 pods)."""
    cumulative_grew: list[ShareChange]
    cumulative_shrank: list[ShareChange]
    flat_grew: list[ShareChange]
    flat_shrank: list[ShareChange]


def compare_cpu_profiles(
    *,
    run: Profile,
    baseline: Profile,
    baseline_run_id: str,
    run_pods: int | None = None,
    baseline_pods: int | None = None,
    top: int = 5,
) -> ProfileComparison:
    """``run``'s CPU profile against ``baseline``'s, with ``top`` functions per list.

    :param run_pods: the pods the run scheduled in the profile's window (None: unknown).
    :param baseline_pods: the same for the baseline.
    :raises ProfileError: when a profile is no CPU profile (no sample type ``cpu`` in nanoseconds).
    """
    now, before = _cpu(run, "the run"), _cpu(baseline, "the baseline")
    # A window without CPU has no shares: nothing moved against it, nor it against anything.
    comparable = bool(now.total and before.total)
    cumulative = _changes(now.cumulative, before.cumulative, now, before) if comparable else []
    flat = _changes(now.flat, before.flat, now, before) if comparable else []
    run_seconds, baseline_seconds = now.total / 1e9, before.total / 1e9
    return ProfileComparison(
        baseline_run_id=baseline_run_id,
        run_cpu_seconds=run_seconds,
        baseline_cpu_seconds=baseline_seconds,
        run_cpu_seconds_per_pod=run_seconds / run_pods if run_pods else None,
        baseline_cpu_seconds_per_pod=baseline_seconds / baseline_pods if baseline_pods else None,
        cumulative_grew=_grew(cumulative)[:top],
        cumulative_shrank=_shrank(cumulative)[:top],
        flat_grew=_grew(flat)[:top],
        flat_shrank=_shrank(flat)[:top],
    )


def cpu_change_sentence(comparison: ProfileComparison, *, functions: int = 3) -> str:
    """One line for an alert: how the CPU changed and the functions whose share grew most.

    The change is per pod when both pod counts are known, else of the CPU in the profiles' windows;
    the functions are the first ``functions`` of ``cumulative_grew``. E.g. ``CPU per pod +38 % vs
    baseline r1; grew most: pkg.F +12.4 pp (3.1 % → 15.5 %)``.
    """
    if comparison.run_cpu_seconds_per_pod is not None and comparison.baseline_cpu_seconds_per_pod is not None:
        what, now, before = (
            "CPU per pod",
            comparison.run_cpu_seconds_per_pod,
            comparison.baseline_cpu_seconds_per_pod,
        )
    else:
        what, now, before = "CPU", comparison.run_cpu_seconds, comparison.baseline_cpu_seconds
    baseline = comparison.baseline_run_id
    if not before:
        return f"{what} {now:.3g} s, none in baseline {baseline}: no shares to compare"
    change = f"{what} {(now - before) / before * 100:+.0f} % vs baseline {baseline}"
    grew = ", ".join(
        f"{c.function} {c.change_points:+.1f} pp ({_percent(c.baseline_share)} → {_percent(c.run_share)})"
        for c in comparison.cumulative_grew[:functions]
    )
    return f"{change}; grew most: {grew}" if grew else f"{change}; no function's share grew"


def _percent(share: float) -> str:
    return f"{share * 100:.1f} %"


def _cpu(profile: Profile, which: str) -> FunctionValues:
    values = function_values(profile, CPU_SAMPLE_TYPE)
    if values.sample_type.unit != CPU_UNIT:
        raise ProfileError(f"{which}'s CPU is in {values.sample_type.unit}, not {CPU_UNIT}")
    return values


def _changes(
    now: Mapping[str, int], before: Mapping[str, int], run: FunctionValues, baseline: FunctionValues
) -> list[ShareChange]:
    """Every function's change of share, of the functions with a value in either profile."""
    changes = []
    for function in now.keys() | before.keys():
        run_share, baseline_share = run.share(now.get(function, 0)), baseline.share(before.get(function, 0))
        changes.append(
            ShareChange(
                function=function,
                baseline_share=baseline_share,
                run_share=run_share,
                change_points=(run_share - baseline_share) * 100,
            )
        )
    return changes


# Largest change first; ties by name, so the same profiles always give the same lists.
def _grew(changes: list[ShareChange]) -> list[ShareChange]:
    return sorted((c for c in changes if c.change_points > 0), key=lambda c: (-c.change_points, c.function))


def _shrank(changes: list[ShareChange]) -> list[ShareChange]:
    return sorted((c for c in changes if c.change_points < 0), key=lambda c: (c.change_points, c.function))
