"""Profiles for the tests: those the Go runtime wrote (``fixtures/``) and ones written here."""

from __future__ import annotations

from pathlib import Path

from kai_scale.profiles.pprof import Profile, decode_profile

FIXTURES = Path(__file__).parent / "fixtures"
# main.heavy spins 3 units per unit of main.light, or 1 (fixtures/README.md).
HEAVY3 = FIXTURES / "cpu_heavy3.pb.gz"
HEAVY1 = FIXTURES / "cpu_heavy1.pb.gz"
HEAP = FIXTURES / "heap.pb.gz"


def fixture(path: Path) -> Profile:
    """The decoded fixture at ``path``."""
    return decode_profile(path.read_bytes())
