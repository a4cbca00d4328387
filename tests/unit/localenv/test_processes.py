"""localenv.processes: a background process started, found and stopped; what a wait tells apart."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from localenv.processes import ComponentError, running_pid, start, stop, wait_until
from tests.waiting import wait_for


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


def test_a_started_process_runs_in_its_own_session_with_its_output_in_its_log(tmp_path: Path) -> None:
    argv = ["sh", "-c", "echo started; echo failing >&2; exec sleep 60"]
    pid = start(name="sleeper", argv=argv, log_dir=tmp_path / "logs", run_dir=tmp_path / "run")
    try:
        assert running_pid(name="sleeper", run_dir=tmp_path / "run") == pid
        assert os.getsid(pid) == pid, "its own session: stopping it stops its process group"
        log = tmp_path / "logs" / "sleeper.log"
        wait_for(lambda: log.read_text() == "started\nfailing\n", timeout=10, what="its output in its log")
    finally:
        stop(name="sleeper", run_dir=tmp_path / "run")
    assert running_pid(name="sleeper", run_dir=tmp_path / "run") is None
    assert not (tmp_path / "run" / "sleeper.pid").exists()
    assert not Path(f"/proc/{pid}").exists(), "reaped: no zombie left"


def test_a_started_process_gets_no_descriptor_of_ours_and_sigpipe_at_its_default(tmp_path: Path) -> None:
    """As Popen starts it: a pipe this process holds would otherwise stay open until the component stops."""
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    try:
        pid = start(name="sleeper", argv=["sleep", "60"], log_dir=tmp_path, run_dir=tmp_path)
    finally:
        os.close(read_end)
        os.close(write_end)
    try:
        wait_for(lambda: Path(f"/proc/{pid}/exe").resolve().name == "sleep", timeout=10, what="sleep")
        assert sorted(int(fd) for fd in os.listdir(f"/proc/{pid}/fd")) == [0, 1, 2]
        assert os.readlink(f"/proc/{pid}/fd/0") == os.devnull
        status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        assert not int(status["SigIgn"], 16) & (1 << (signal.SIGPIPE - 1)), "Python ignores SIGPIPE; not it"
    finally:
        stop(name="sleeper", run_dir=tmp_path)


def test_the_program_is_found_on_the_path_it_is_given(tmp_path: Path) -> None:
    programs = tmp_path / "bin"
    programs.mkdir()
    (programs / "component").write_text('#!/bin/sh\necho "on its path"\nexec sleep 60\n')
    (programs / "component").chmod(0o755)
    environment = {"PATH": f"{programs}:/usr/bin:/bin"}
    pid = start(name="component", argv=["component"], log_dir=tmp_path, run_dir=tmp_path, env=environment)
    try:
        log = tmp_path / "component.log"
        wait_for(lambda: log.read_text() == "on its path\n", timeout=10, what="it ran")
        assert running_pid(name="component", run_dir=tmp_path) == pid
    finally:
        stop(name="component", run_dir=tmp_path)


def test_a_process_that_exited_on_its_own_is_reaped_when_stopped(tmp_path: Path) -> None:
    pid = start(name="crashed", argv=["sh", "-c", "exit 3"], log_dir=tmp_path, run_dir=tmp_path)
    wait_for(lambda: running_pid(name="crashed", run_dir=tmp_path) is None, timeout=10, what="its exit")
    assert Path(f"/proc/{pid}").exists(), "a zombie until reaped"
    stop(name="crashed", run_dir=tmp_path)
    assert not Path(f"/proc/{pid}").exists()


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    argv = ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.1; done"]
    pid = start(name="stubborn", argv=argv, log_dir=tmp_path, run_dir=tmp_path)
    try:
        wait_for(lambda: (tmp_path / "stubborn.log").read_text() == "ready\n", timeout=10, what="its trap")
    finally:
        stop(name="stubborn", run_dir=tmp_path, grace_seconds=0.5)
    assert running_pid(name="stubborn", run_dir=tmp_path) is None
    assert not Path(f"/proc/{pid}").exists()


def test_a_program_that_does_not_exist_is_named(tmp_path: Path) -> None:
    with pytest.raises(ComponentError, match=r"^registry: cannot start no-such-program: no such program"):
        start(name="registry", argv=["no-such-program"], log_dir=tmp_path, run_dir=tmp_path)
    assert not (tmp_path / "registry.pid").exists()
