"""localenv.processes.wait_until: what a component that does not come up is told apart by."""

from __future__ import annotations

from pathlib import Path

import pytest

from localenv.processes import ComponentError, wait_until


def test_the_wait_ends_as_soon_as_the_condition_holds(tmp_path: Path) -> None:
    answers = iter([False, False, True])
    wait_until(lambda: next(answers), timeout=5, component="registry", log_path=tmp_path, what="listening")
    assert next(answers, None) is None, "asked until it held, and no more"


def test_a_component_that_exits_first_is_named_at_once(tmp_path: Path) -> None:
    log = tmp_path / "registry.log"
    with pytest.raises(ComponentError) as stopped:
        wait_until(
            lambda: False,
            timeout=60,
            component="registry",
            log_path=log,
            what="listening",
            alive=lambda: False,
        )
    assert str(stopped.value) == f"registry exited before listening; see its log: {log}"


def test_at_the_deadline_the_component_and_its_log_are_named(tmp_path: Path) -> None:
    log = tmp_path / "registry.log"
    with pytest.raises(ComponentError) as stopped:
        wait_until(lambda: False, timeout=0.3, component="registry", log_path=log, what="listening")
    assert str(stopped.value) == f"registry: not listening after 0 s; see its log: {log}"
