"""A profile's total and top functions: as ``go tool pprof -top`` counts them, in a strict model."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pydantic
import pytest

from kai_scale.profiles.pprof import ProfileError, decode_profile
from kai_scale.profiles.summary import FunctionShare, ProfileSummary, function_values, summarize
from tests.unit.provider.profiles.builder import (
    HEAP,
    HEAVY1,
    HEAVY3,
    LIGHT3,
    cpu_profile,
    fixture,
    profile_bytes,
)
from tests.unit.provider.profiles.go_pprof import GoPprof


@pytest.mark.parametrize(
    ("path", "sample_type"),
    [
        (HEAVY3, "cpu"),
        (HEAVY3, "samples"),
        (HEAVY1, "cpu"),
        (LIGHT3, "cpu"),
        (HEAP, "alloc_objects"),
        (HEAP, "alloc_space"),
        (HEAP, "inuse_objects"),
        (HEAP, "inuse_space"),
    ],
    ids=lambda value: value.name if isinstance(value, Path) else value,
)
def test_flat_and_cumulative_values_per_function_are_go_tool_pprofs(
    path: Path, sample_type: str, go_pprof: GoPprof
) -> None:
    """The total and every function's flat and cumulative value are those of ``go tool pprof -top``.

    Cumulative counts a sample once however often a function is on its stack (main.light recurses).
    """
    values = function_values(fixture(path), sample_type)
    table = go_pprof.top(path, sample_type, values.sample_type.unit)
    assert values.total == table.total
    assert values.flat == table.flat
    assert values.cumulative == table.cumulative


def test_the_fixtures_heavy_function_spends_about_three_times_the_light_ones_cpu() -> None:
    """The Go program's known workload is what the summary shows: main.heavy spins 3 units per 1."""
    summary = summarize(fixture(HEAVY3), "cpu")
    flat = {share.function: share.share for share in summary.top_flat}
    assert summary.top_flat[0].function == "main.heavy"
    assert 2 < flat["main.heavy"] / flat["main.light"] < 5
    cumulative = {share.function: share for share in summary.top_cumulative}
    # main.light runs only under main.heavy, so heavy's cumulative value holds light's too.
    heavy_and_light = {share.function: share.value for share in summary.top_flat[:2]}
    assert cumulative["main.heavy"].value >= sum(heavy_and_light.values())


def test_a_cpu_summary_gives_the_cpu_seconds_and_the_profiles_window() -> None:
    profile = fixture(HEAVY3)
    summary = summarize(profile, "cpu", top=2)
    assert (summary.sample_type, summary.unit) == ("cpu", "nanoseconds")
    assert summary.cpu_seconds == summary.total / 1e9
    assert summary.window_start == datetime.fromtimestamp(profile.time_nanos // 1000 / 1e6, UTC)
    assert summary.window_seconds == profile.duration_nanos / 1e9
    assert len(summary.top_flat) == len(summary.top_cumulative) == 2


def test_a_heap_summary_names_the_allocating_function_and_has_no_cpu_seconds_nor_duration() -> None:
    """main.allocate keeps 64 slices of 64 KiB; Go's heap profiles say when, not for how long."""
    summary = summarize(fixture(HEAP), "inuse_space")
    (first, *_) = summary.top_flat
    assert (first.function, summary.unit) == ("main.allocate", "bytes")
    assert first.value >= 64 * 64 * 1024
    assert first.share > 0.9
    assert summary.cpu_seconds is None
    assert summary.window_seconds is None
    assert summary.window_start is not None


def test_a_sample_type_the_profile_lacks_is_refused_naming_those_it_has() -> None:
    with pytest.raises(
        ProfileError,
        match="no sample type 'cpu'; it has: alloc_objects/count, alloc_space/bytes, "
        "inuse_objects/count, inuse_space/bytes",
    ):
        summarize(fixture(HEAP), "cpu")


def test_a_window_without_samples_is_a_summary_of_nothing_not_an_error() -> None:
    summary = summarize(cpu_profile({}), "cpu")
    assert (summary.total, summary.cpu_seconds, summary.top_flat, summary.top_cumulative) == (0, 0, [], [])
    assert summary.window_seconds == 60


def test_a_recursive_function_counts_once_per_sample_and_a_stackless_sample_only_in_the_total() -> None:
    profile = decode_profile(
        profile_bytes(
            [(("walk", "walk", "walk", "main"), (1, 30)), (("sort", "main"), (1, 10)), ((), (1, 60))]
        )
    )
    values = function_values(profile, "cpu")
    assert values.total == 100
    assert values.flat == {"walk": 30, "sort": 10}
    assert values.cumulative == {"walk": 30, "sort": 10, "main": 40}


def test_the_top_lists_are_cut_at_n_largest_first_ties_by_name() -> None:
    profile = cpu_profile({("b", "main"): 2, ("a", "main"): 2, ("c", "main"): 6, ("d", "main"): 1})
    summary = summarize(profile, "cpu", top=3)
    assert summary.top_flat == [
        FunctionShare(function="c", value=60_000_000, share=6 / 11),
        FunctionShare(function="a", value=20_000_000, share=2 / 11),
        FunctionShare(function="b", value=20_000_000, share=2 / 11),
    ]
    assert [share.function for share in summary.top_cumulative] == ["main", "c", "a"]


def test_a_summary_is_frozen_strict_and_reads_back_from_its_json() -> None:
    """The results carry it as JSON; the trend view and the comparison read it back."""
    summary = summarize(fixture(HEAVY1), "cpu")
    assert ProfileSummary.model_validate_json(summary.model_dump_json()) == summary
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        summary.total = 1
    with pytest.raises(pydantic.ValidationError, match="extra"):
        ProfileSummary.model_validate({**summary.model_dump(), "samples": 3})
