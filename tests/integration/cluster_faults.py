"""Faults of the local cluster's control plane, staged by the tests while a night runs."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from localenv.environment import LocalEnvironment
from tests.waiting import wait_for


def _exited(proc: Path) -> bool:
    """Gone, or a zombie (kwokctl started it detached; nothing may reap it here)."""
    try:
        return (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def restart_api_server(local_env: LocalEnvironment, *, down_seconds: float) -> None:
    """Stop kube-apiserver, keep it down, start it again with the same command, as kwokctl had it."""
    cluster_dir = local_env.config.kwok_workdir / "clusters" / "kai-scale"
    pid_file = cluster_dir / "pids" / "kube-apiserver.pid"
    pid = int(pid_file.read_text())
    proc = Path(f"/proc/{pid}")
    argv = [part.decode() for part in (proc / "cmdline").read_bytes().split(b"\0") if part]
    cwd = os.readlink(proc / "cwd")
    environ = dict(
        line.decode().split("=", 1) for line in (proc / "environ").read_bytes().split(b"\0") if b"=" in line
    )
    os.kill(pid, signal.SIGKILL)  # a crash: its graceful shutdown waits out open watches for a minute
    wait_for(lambda: _exited(proc), timeout=30, what="kube-apiserver to exit")
    time.sleep(down_seconds)
    # Started detached through a shell, as kwokctl starts it, so that it outlives this test.
    started = subprocess.run(
        ["setsid", "sh", "-c", '"$@" >>"$LOG" 2>&1 & echo $!', "sh", *argv],
        cwd=cwd,
        env={**environ, "LOG": str(cluster_dir / "logs" / "kube-apiserver.log")},
        capture_output=True,
        text=True,
        check=True,
    )
    # kwokctl stops the cluster by its pid files: the new process must be the one it finds.
    pid_file.write_text(started.stdout.strip())
    wait_for(local_env.api_ready, timeout=60, what="kube-apiserver to serve again")
