"""Profiles for the tests: those the Go runtime wrote (``fixtures/``) and ones written here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from kai_scale.profiles.pprof import Profile, ProfileMessage, decode_profile

FIXTURES = Path(__file__).parent / "fixtures"
# main.heavy spins 3 units per unit of main.light, or 1; or main.light 3 to heavy's 3, twice the rounds:
# against HEAVY3, a run whose scheduler spends more CPU, the more in main.light (fixtures/README.md).
HEAVY3 = FIXTURES / "cpu_heavy3.pb.gz"
HEAVY1 = FIXTURES / "cpu_heavy1.pb.gz"
LIGHT3 = FIXTURES / "cpu_light3.pb.gz"
HEAP = FIXTURES / "heap.pb.gz"

CPU_TYPES = (("samples", "count"), ("cpu", "nanoseconds"))
# Go's CPU profiles sample every 10 ms of CPU.
CPU_PERIOD_NANOS = 10_000_000
# 2026-11-22T02:00:00Z, a night's window.
NIGHT_NANOS = 1_795_312_800 * 10**9


def profile_bytes(
    samples: Sequence[tuple[Sequence[str], Sequence[int]]],
    *,
    sample_types: Sequence[tuple[str, str]] = CPU_TYPES,
) -> bytes:
    """A raw (not gzip-compressed) profile of ``samples``: (stack, leaf first; values) each.

    A function and a location per name; a minute's window of a night, sampled as CPU profiles are.
    """
    strings = [""]

    def string(text: str) -> int:
        if text not in strings:
            strings.append(text)
        return strings.index(text)

    message = ProfileMessage(time_nanos=NIGHT_NANOS, duration_nanos=60 * 10**9, period=CPU_PERIOD_NANOS)
    for type_, unit in sample_types:
        message.sample_type.add(type=string(type_), unit=string(unit))
    message.period_type.type, message.period_type.unit = string("cpu"), string("nanoseconds")
    ids: dict[str, int] = {}
    for stack, values in samples:
        for name in stack:
            if name not in ids:
                ids[name] = len(ids) + 1
                message.function.add(id=ids[name], name=string(name))
                message.location.add(id=ids[name]).line.add(function_id=ids[name])
        message.sample.add(location_id=[ids[name] for name in stack], value=list(values))
    message.string_table.extend(strings)
    data: bytes = message.SerializeToString()
    return data


def cpu_profile(samples: Mapping[tuple[str, ...], int]) -> Profile:
    """A decoded CPU profile with ``samples[stack]`` 10 ms samples at each stack (leaf first)."""
    return decode_profile(
        profile_bytes([(stack, (count, count * CPU_PERIOD_NANOS)) for stack, count in samples.items()])
    )


def fixture(path: Path) -> Profile:
    """The decoded fixture at ``path``."""
    return decode_profile(path.read_bytes())
