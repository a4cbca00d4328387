"""The Makefile's demo target: the node count it runs at (`make -n` prints the commands, runs none)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import REPO


def _demo_command(*make_args: str, env_node_count: str | None = None) -> str:
    # An outer make (make test) passes its own variables down through MAKEFLAGS: not wanted here.
    env = {k: v for k, v in os.environ.items() if k not in {"NODE_COUNT", "MAKEFLAGS", "MAKELEVEL", "MFLAGS"}}
    if env_node_count is not None:
        env["NODE_COUNT"] = env_node_count
    printed = subprocess.run(
        ["make", "--no-print-directory", "-n", "demo", *make_args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return next(line for line in printed.splitlines() if "-m localenv.demo" in line)


@pytest.mark.parametrize(
    ("make_args", "env_node_count", "node_count"),
    [((), None, "100"), (("NODE_COUNT=31",), None, "31"), ((), "7", "7")],
    ids=["the demo's default", "on the command line", "in the environment"],
)
def test_the_demo_runs_at_the_node_count_asked_for(
    make_args: tuple[str, ...], env_node_count: str | None, node_count: str
) -> None:
    assert f"--node-count {node_count} " in _demo_command(*make_args, env_node_count=env_node_count)
