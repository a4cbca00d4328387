"""The real node's cgroups (cgroupfs driver, cgroups v1): made before its kubelet, removed after."""

from __future__ import annotations

import os
import signal
import time
from contextlib import suppress
from pathlib import Path

from kai_scale_model.waiting import Deadline


def v2_only() -> bool:
    """Whether /sys/fs/cgroup is the unified hierarchy alone (it then has cgroup.controllers)."""
    return Path("/sys/fs/cgroup/cgroup.controllers").exists()


def _v1_hierarchies() -> list[Path]:
    """The cgroups v1 hierarchies (``unified`` is the v2 one of a hybrid machine: not the kubelet's)."""
    return [
        hierarchy
        for hierarchy in Path("/sys/fs/cgroup").iterdir()
        if hierarchy.is_dir() and not hierarchy.is_symlink() and hierarchy.name != "unified"
    ]


def create(root: str) -> None:
    """The kubelet's cgroup root in every hierarchy: it must exist before the kubelet starts."""
    for hierarchy in _v1_hierarchies():
        tree = hierarchy / root
        tree.mkdir(exist_ok=True)
        if hierarchy.name == "cpuset":
            # A new cpuset has no CPUs or memory nodes until given its parent's.
            for setting in ("cpuset.cpus", "cpuset.mems"):
                (tree / setting).write_text((hierarchy / setting).read_text())


def kill_members(root: str) -> None:
    """SIGKILL every process in the ``<root>`` trees and wait (up to 10 s) until they are gone."""

    def members() -> set[int]:
        pids: set[int] = set()
        for hierarchy in _v1_hierarchies():
            # os.walk, not rglob: a pod's cgroup may vanish during the walk, which rglob raises for.
            for directory, _, files in os.walk(hierarchy / root):
                if "cgroup.procs" in files:
                    with suppress(OSError):
                        pids.update(int(line) for line in Path(directory, "cgroup.procs").read_text().split())
        return pids

    # Not wait_for: each look kills what it finds, and a process that outlives the deadline is no error.
    deadline = Deadline(seconds=10)
    while (pids := members()) and not deadline.passed():
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def remove(root: str) -> None:
    """Every hierarchy's ``<root>`` tree, deepest first (its processes are gone).

    Also the v2 hierarchy of a hybrid machine, where runc makes one too.
    """
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        tree = hierarchy / root
        if not tree.is_dir():
            continue
        # Deepest first (bottom-up), the tree itself last.
        for directory, _, _ in os.walk(tree, topdown=False):
            with suppress(OSError):
                os.rmdir(directory)
