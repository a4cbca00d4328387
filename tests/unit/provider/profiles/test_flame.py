"""A profile as a flame graph's call tree: each sample counted along its path, as ``go tool pprof`` has it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from kai_scale.profiles.flame import MAX_DEPTH, FlameNode, flame_graph
from kai_scale.profiles.pprof import ProfileError
from tests.unit.provider.profiles.builder import HEAP, HEAVY1, HEAVY3, LIGHT3, cpu_profile, fixture
from tests.unit.provider.profiles.go_pprof import GoPprof


def _shape(node: FlameNode) -> tuple[str, int, list[object]]:
    return (node["name"], node["value"], [_shape(child) for child in node["children"]])


def test_each_sample_counts_along_its_path_from_the_root() -> None:
    profile = cpu_profile({("c", "b", "a"): 3, ("b", "a"): 2, ("d", "a"): 1, ("a",): 4})
    graph = flame_graph(profile, "samples")
    assert (graph["sample_type"], graph["unit"], graph["total"]) == ("samples", "count", 10)
    assert _shape(graph["root"]) == (
        "all",
        10,
        [("a", 10, [("b", 5, [("c", 3, [])]), ("d", 1, [])])],
    )


def test_the_same_function_under_two_callers_is_two_frames() -> None:
    graph = flame_graph(cpu_profile({("work", "x"): 2, ("work", "y"): 1}), "cpu")
    assert _shape(graph["root"]) == (
        "all",
        3 * 10**7,
        [("x", 2 * 10**7, [("work", 2 * 10**7, [])]), ("y", 10**7, [("work", 10**7, [])])],
    )


def test_paths_under_the_minimum_share_stay_in_their_callers_value() -> None:
    profile = cpu_profile({("hot", "main"): 999, ("cold", "main"): 1})
    graph = flame_graph(profile, "samples", min_share=0.01)
    assert _shape(graph["root"]) == ("all", 1000, [("main", 1000, [("hot", 999, [])])])


def test_stacks_deeper_than_the_limit_end_in_the_frame_at_the_limit() -> None:
    stack = tuple(f"f{depth}" for depth in range(MAX_DEPTH + 50))  # leaf first: f0 is the leaf
    graph = flame_graph(cpu_profile({stack: 1}), "samples")
    depth, node = 0, graph["root"]
    while node["children"]:
        (node,) = node["children"]
        depth += 1
    assert depth == MAX_DEPTH
    assert node["name"] == stack[-MAX_DEPTH], "the root-most frames are kept"


def _first_frames(node: FlameNode, above: frozenset[str] = frozenset()) -> Iterator[FlameNode]:
    """Each node whose function is not also above it: a recursing function counted once per path."""
    pending = [(node, above)]
    while pending:
        current, callers = pending.pop()
        if current["name"] not in callers:
            yield current
        pending.extend((child, callers | {current["name"]}) for child in current["children"])


@pytest.mark.parametrize(
    ("path", "sample_type"),
    [(HEAVY3, "cpu"), (HEAVY1, "cpu"), (LIGHT3, "cpu"), (HEAP, "inuse_space"), (HEAP, "alloc_space")],
    ids=lambda value: value.name if isinstance(value, Path) else value,
)
def test_without_pruning_each_functions_frames_add_up_to_go_tool_pprofs_cumulative_value(
    path: Path, sample_type: str, go_pprof: GoPprof
) -> None:
    """Each function's frames hold what ``go tool pprof -top`` counts as its cumulative value.

    A frame counts once per path however the function recurses (main.light does); the root holds the
    total.
    """
    graph = flame_graph(fixture(path), sample_type, min_share=0)
    table = go_pprof.top(path, sample_type, graph["unit"])
    assert graph["total"] == graph["root"]["value"] == table.total
    cumulative: Counter[str] = Counter()
    for frame in _first_frames(graph["root"]):
        cumulative[frame["name"]] += frame["value"]
    del cumulative["all"]
    assert dict(cumulative) == table.cumulative


def test_a_sample_type_the_profile_does_not_have_is_named() -> None:
    with pytest.raises(ProfileError, match="no sample type 'alloc_space'; it has: samples/count, cpu/nano"):
        flame_graph(cpu_profile({("a",): 1}), "alloc_space")
