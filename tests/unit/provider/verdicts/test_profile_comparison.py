"""A run's CPU profile against a baseline's: the shares that moved, CPU per pod, the alert's sentence."""

from __future__ import annotations

import pytest

from kai_scale.profiles.pprof import ProfileError, decode_profile
from kai_scale.verdicts.profile_comparison import (
    ProfileComparison,
    ShareChange,
    compare_cpu_profiles,
    cpu_change_sentence,
)
from tests.unit.provider.profiles.builder import HEAP, HEAVY1, HEAVY3, cpu_profile, fixture, profile_bytes

# The scheduler's cycle: allocate and reclaim under run, allocate calling a scoring plugin.
BASELINE = cpu_profile(
    {
        ("plugin.score", "actions.allocate", "framework.run"): 10,
        ("actions.allocate", "framework.run"): 20,
        ("actions.reclaim", "framework.run"): 70,
    }
)
# The scoring plugin got slower: allocate's share grows through it more than through its own code.
RUN = cpu_profile(
    {
        ("plugin.score", "actions.allocate", "framework.run"): 100,
        ("actions.allocate", "framework.run"): 50,
        ("actions.reclaim", "framework.run"): 50,
    }
)


def _rows(changes: list[ShareChange]) -> list[tuple[str, float, float, float]]:
    return [(c.function, c.baseline_share, c.run_share, round(c.change_points, 9)) for c in changes]


def test_the_function_whose_share_grew_is_named_first_with_both_shares() -> None:
    comparison = compare_cpu_profiles(run=RUN, baseline=BASELINE, baseline_run_id="r1")
    assert _rows(comparison.cumulative_grew) == [
        ("actions.allocate", 0.3, 0.75, 45),
        ("plugin.score", 0.1, 0.5, 40),
    ]
    # framework.run has all the CPU in both: its share did not change, so it is in neither list.
    assert _rows(comparison.cumulative_shrank) == [("actions.reclaim", 0.7, 0.25, -45)]
    assert _rows(comparison.flat_grew) == [("plugin.score", 0.1, 0.5, 40), ("actions.allocate", 0.2, 0.25, 5)]
    assert _rows(comparison.flat_shrank) == [("actions.reclaim", 0.7, 0.25, -45)]


def test_a_function_only_one_profile_has_is_at_share_0_in_the_other() -> None:
    run = cpu_profile(
        {("actions.consolidate", "framework.run"): 25, ("actions.reclaim", "framework.run"): 75}
    )
    comparison = compare_cpu_profiles(run=run, baseline=BASELINE, baseline_run_id="r1")
    assert _rows(comparison.flat_grew)[0] == ("actions.consolidate", 0, 0.25, 25)
    assert comparison.cumulative_shrank[0].function == "actions.allocate"
    assert comparison.cumulative_shrank[0].run_share == 0


def test_the_lists_are_cut_at_top() -> None:
    comparison = compare_cpu_profiles(run=RUN, baseline=BASELINE, baseline_run_id="r1", top=1)
    assert [c.function for c in comparison.cumulative_grew] == ["actions.allocate"]
    assert len(comparison.flat_shrank) == 1


def test_cpu_per_pod_is_given_for_each_run_whose_pod_count_is_known() -> None:
    comparison = compare_cpu_profiles(
        run=RUN, baseline=BASELINE, baseline_run_id="r1", run_pods=100, baseline_pods=50
    )
    assert (comparison.run_cpu_seconds, comparison.baseline_cpu_seconds) == (2, 1)
    assert comparison.run_cpu_seconds_per_pod == pytest.approx(0.02)
    assert comparison.baseline_cpu_seconds_per_pod == pytest.approx(0.02)
    unknown = compare_cpu_profiles(
        run=RUN, baseline=BASELINE, baseline_run_id="r1", run_pods=100, baseline_pods=0
    )
    assert unknown.run_cpu_seconds_per_pod == pytest.approx(0.02)
    assert unknown.baseline_cpu_seconds_per_pod is None


def test_the_alert_sentence_gives_cpu_per_pod_and_the_functions_that_grew() -> None:
    comparison = compare_cpu_profiles(
        run=RUN,
        baseline=BASELINE,
        baseline_run_id="20261121T020000Z-scheduled-1a2b3c4d",
        run_pods=80,
        baseline_pods=100,
    )
    assert cpu_change_sentence(comparison) == (
        "CPU per pod +150 % vs baseline 20261121T020000Z-scheduled-1a2b3c4d; grew most: "
        "actions.allocate +45.0 pp (30.0 % → 75.0 %), plugin.score +40.0 pp (10.0 % → 50.0 %)"
    )
    assert cpu_change_sentence(comparison, functions=1).endswith(
        "actions.allocate +45.0 pp (30.0 % → 75.0 %)"
    )


def test_without_pod_counts_the_sentence_compares_the_cpu_of_the_windows() -> None:
    comparison = compare_cpu_profiles(run=RUN, baseline=BASELINE, baseline_run_id="r1", run_pods=80)
    assert cpu_change_sentence(comparison).startswith(
        "CPU +100 % vs baseline r1; grew most: actions.allocate"
    )


def test_the_sentence_says_when_no_share_grew_or_the_baseline_had_no_cpu() -> None:
    """A baseline window without CPU has no shares: every function would have "grown" from nothing."""
    same = compare_cpu_profiles(run=BASELINE, baseline=BASELINE, baseline_run_id="r1")
    assert cpu_change_sentence(same) == "CPU +0 % vs baseline r1; no function's share grew"
    empty = compare_cpu_profiles(run=RUN, baseline=cpu_profile({}), baseline_run_id="r1")
    assert cpu_change_sentence(empty) == "CPU 2 s, none in baseline r1: no shares to compare"


def test_the_go_programs_light_function_grows_when_heavy_spins_less() -> None:
    """The Go runtime's profiles of the same program, heavy spinning 1 unit per light's instead of 3."""
    comparison = compare_cpu_profiles(run=fixture(HEAVY1), baseline=fixture(HEAVY3), baseline_run_id="heavy3")
    assert comparison.flat_grew[0].function == comparison.cumulative_grew[0].function == "main.light"
    assert comparison.flat_shrank[0].function == "main.heavy"
    light = comparison.flat_grew[0]
    # 3:1 and 1:1 of the spinning, give or take the sampling and the runtime's own share.
    assert 0.15 < light.baseline_share < 0.35
    assert 0.35 < light.run_share < 0.6


def test_a_window_without_cpu_samples_has_no_share_changes() -> None:
    for run, baseline in ((RUN, cpu_profile({})), (cpu_profile({}), BASELINE)):
        comparison = compare_cpu_profiles(run=run, baseline=baseline, baseline_run_id="r1")
        lists = (
            comparison.cumulative_grew,
            comparison.cumulative_shrank,
            comparison.flat_grew,
            comparison.flat_shrank,
        )
        assert lists == ([], [], [], [])


def test_a_profile_without_cpu_is_refused() -> None:
    with pytest.raises(ProfileError, match="no sample type 'cpu'; it has: alloc_objects/count"):
        compare_cpu_profiles(run=fixture(HEAP), baseline=BASELINE, baseline_run_id="r1")
    counted = decode_profile(profile_bytes([(("main",), (1,))], sample_types=[("cpu", "count")]))
    with pytest.raises(ProfileError, match="the baseline's CPU is in count, not nanoseconds"):
        compare_cpu_profiles(run=RUN, baseline=counted, baseline_run_id="r1")


def test_a_comparison_reads_back_from_its_json() -> None:
    comparison = compare_cpu_profiles(run=RUN, baseline=BASELINE, baseline_run_id="r1", run_pods=1)
    assert ProfileComparison.model_validate_json(comparison.model_dump_json()) == comparison
