"""Background processes that localenv starts itself: start with a log and a pid file, stop, wait for."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from kai_scale_model.waiting import WaitTimeout, wait_for


class ComponentError(RuntimeError):
    """A component of the local environment failed to start or stop; the message names it and its log."""


def _start_time(pid: int) -> str | None:
    """The process' start time in clock ticks, to tell it from a later process that reuses its pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22; the command name (field 2) may hold spaces, so split after its closing parenthesis.
    return stat.rsplit(")", 1)[1].split()[19]


def start(
    *,
    name: str,
    argv: Sequence[str],
    log_dir: Path,
    run_dir: Path,
    env: Mapping[str, str] | None = None,
) -> int:
    """Start ``argv`` in its own session, output to ``<log_dir>/<name>.log``; return its pid.

    Spawned as ``subprocess.Popen`` starts a program (found on the ``PATH`` of ``env``, with no
    descriptor but the standard three, SIGPIPE and SIGXFSZ at their defaults), but not held as a Popen:
    the process outlives this one (``make local-up`` exits, the tests' session ends), and Python takes a
    Popen of a process still running at its exit for a leak.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    environment = dict(env) if env is not None else dict(os.environ)
    program = shutil.which(argv[0], path=environment.get("PATH", os.defpath))
    if program is None:
        raise ComponentError(f"{name}: cannot start {argv[0]}: no such program on its PATH")
    log_path = log_dir / f"{name}.log"
    with log_path.open("ab") as log:
        try:
            pid = os.posix_spawn(
                program,
                list(argv),
                environment,
                file_actions=[
                    *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable_descriptors()),
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, log.fileno(), 1),
                    (os.POSIX_SPAWN_DUP2, log.fileno(), 2),
                ],
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
                setsid=True,
            )
        except OSError as error:
            raise ComponentError(f"{name}: cannot start {argv[0]}: {error}") from error
    (run_dir / f"{name}.pid").write_text(f"{pid} {_start_time(pid)}\n")
    return pid


def _inheritable_descriptors() -> list[int]:
    """The descriptors above stderr a child of this process would inherit (Popen's ``close_fds``)."""
    found = []
    for entry in os.listdir("/proc/self/fd"):
        descriptor = int(entry)
        with contextlib.suppress(OSError):  # the listing's own, closed since
            if descriptor > 2 and os.get_inheritable(descriptor):
                found.append(descriptor)
    return found


def _recorded(*, name: str, run_dir: Path) -> tuple[int, str] | None:
    """The pid and start time in the pid file of ``name``, if there is one."""
    try:
        pid_text, start_time = (run_dir / f"{name}.pid").read_text().split()
        return int(pid_text), start_time
    except (OSError, ValueError):
        return None


def running_pid(*, name: str, run_dir: Path) -> int | None:
    """The pid of the process started as ``name`` if it is still running, else None."""
    recorded = _recorded(name=name, run_dir=run_dir)
    if recorded is None:
        return None
    pid, start_time = recorded
    if _start_time(pid) != start_time or _is_zombie(pid):
        return None
    return pid


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def stop(*, name: str, run_dir: Path, grace_seconds: float = 10.0) -> None:
    """Stop the process group started as ``name`` (TERM, then KILL after the grace period).

    Reaped when this process started it, also after it exited on its own; else by its parent (init,
    once that parent exited).
    """
    pid = running_pid(name=name, run_dir=run_dir)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        if not _gone_within(name=name, run_dir=run_dir, seconds=grace_seconds):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            _gone_within(name=name, run_dir=run_dir, seconds=grace_seconds)
    recorded = _recorded(name=name, run_dir=run_dir)
    # The same process (a zombie keeps its start time), not another that took its pid since.
    if recorded is not None and _start_time(recorded[0]) == recorded[1]:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(recorded[0], os.WNOHANG)
    (run_dir / f"{name}.pid").unlink(missing_ok=True)


def _gone_within(*, name: str, run_dir: Path, seconds: float) -> bool:
    """Whether the process started as ``name`` has stopped running within ``seconds``."""
    try:
        wait_for(
            lambda: running_pid(name=name, run_dir=run_dir),
            until=lambda pid: pid is None,
            what=f"{name} stopped",
            timeout=seconds,
            interval=0.1,
        )
    except WaitTimeout:
        return False
    return True


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_in_use(port: int) -> bool:
    """Whether something already listens on the loopback ``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def wait_until(
    condition: Callable[[], bool],
    *,
    timeout: float,
    component: str,
    log_path: Path,
    what: str,
    alive: Callable[[], bool] | None = None,
) -> None:
    """Poll ``condition`` until it holds; raise a ComponentError naming the component and its log."""

    def holds() -> bool:
        if condition():
            return True
        if alive is not None and not alive():
            raise ComponentError(f"{component} exited before {what}; see its log: {log_path}")
        return False

    wait_for(
        holds,
        until=bool,
        what=f"{component} {what}",
        timeout=timeout,
        interval=0.2,
        error=lambda _: ComponentError(
            f"{component}: not {what} after {timeout:.0f} s; see its log: {log_path}"
        ),
    )


def wait_until_listening(*, name: str, port: int, timeout: float, log_dir: Path, run_dir: Path) -> None:
    """Until the process started as ``name`` listens on ``port``; a ComponentError if it exits first."""
    wait_until(
        lambda: port_in_use(port),
        timeout=timeout,
        component=name,
        log_path=log_dir / f"{name}.log",
        what="listening",
        alive=lambda: running_pid(name=name, run_dir=run_dir) is not None,
    )


def processes_under(path: str) -> Iterator[int]:
    """Processes whose command line names ``path`` or whose working directory is under it."""
    own = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        with contextlib.suppress(OSError):
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if path in command or os.readlink(entry / "cwd").startswith(path):
                yield int(entry.name)
