"""``go tool pprof``, once per session, for the tests that compare our reading of a profile with it."""

from __future__ import annotations

import pytest

from tests.unit.provider.profiles.go_pprof import GoPprof


@pytest.fixture(scope="session")
def go_pprof() -> GoPprof:
    """Runs ``go tool pprof`` and keeps what it answered for the session's other tests."""
    return GoPprof.find()
