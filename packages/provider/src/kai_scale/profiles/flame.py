"""A profile as the tree a flame graph draws (the trend view's d3-flame-graph). Pure.

Each node is a function in a call path from the root: its ``value`` is the sample type's value of the
samples whose stacks pass through that path (what ``go tool pprof``'s flame graph calls its width), and
its children are the functions it called there. d3-flame-graph reads ``name``, ``value`` and
``children`` and draws a node's own value as the part of it no child covers.
"""

from __future__ import annotations

from typing import Final, TypedDict

from kai_scale.profiles.pprof import Profile

# Paths under this share of the total are left out (their value stays in their caller's): a frame of
# a thousandth of the width is under a pixel on a page, and a long profile has tens of thousands of
# them, which would make the page's JSON megabytes.
MIN_SHARE: Final = 0.001
# Frames deeper than this are counted in the frame at this depth: a browser draws no more, and the
# JSON encoders' recursion limits stay far.
MAX_DEPTH: Final = 200


class FlameNode(TypedDict):
    """One call path's node: the function, its value and its callees (d3-flame-graph's input)."""

    name: str
    value: int
    children: list[FlameNode]


class FlameGraph(TypedDict):
    """What the trend view's flame graph loads: the tree, and what its values measure."""

    sample_type: str
    unit: str
    total: int
    root: FlameNode


def flame_graph(profile: Profile, sample_type: str, *, min_share: float = MIN_SHARE) -> FlameGraph:
    """The call tree of ``sample_type``'s values in ``profile``, paths under ``min_share`` left out.

    :raises ProfileError: when the profile has no such sample type (naming those it has).
    """
    index = profile.value_index(sample_type)
    root = FlameNode(name="all", value=0, children=[])
    # The children of each node by name, while the tree is built.
    callees: dict[int, dict[str, FlameNode]] = {}
    for sample in profile.samples:
        value = sample.values[index]
        if value <= 0:
            continue
        root["value"] += value
        node = root
        # Stacks are leaf first; the tree grows from the root.
        for function in reversed(sample.stack[-MAX_DEPTH:]):
            children = callees.setdefault(id(node), {})
            child = children.get(function)
            if child is None:
                child = FlameNode(name=function, value=0, children=[])
                children[function] = child
                node["children"].append(child)
            child["value"] += value
            node = child
    _prune(root, minimum=root["value"] * min_share)
    unit = profile.sample_types[index].unit
    return FlameGraph(sample_type=sample_type, unit=unit, total=root["value"], root=root)


def _prune(root: FlameNode, *, minimum: float) -> None:
    """Leave out every path whose value is under ``minimum``; the rest largest first, then by name."""
    pending = [root]
    while pending:
        node = pending.pop()
        kept = [child for child in node["children"] if child["value"] >= minimum]
        kept.sort(key=lambda child: (-child["value"], child["name"]))
        node["children"] = kept
        pending.extend(kept)
