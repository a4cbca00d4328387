"""localenv/steps.sh: build steps side by side, and the first failure stops the others."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

STEPS = Path(__file__).resolve().parents[3] / "localenv" / "steps.sh"

_SCRIPT = """
set -euo pipefail
shopt -s inherit_errexit
fail() {
  if [[ -n "${step_failure:-}" ]]; then echo "$*" >"$step_failure"; else echo "test: $*" >&2; fi
  exit 1
}
source "$STEPS"
"""


def _run(body: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", _SCRIPT + body],
        env={**os.environ, "STEPS": str(STEPS), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_each_steps_output_is_kept_under_its_name() -> None:
    result = _run(
        """
        start_step one echo first
        start_step two echo second
        start_step three echo third
        await_steps
        echo "$(step_output two) $(step_output one) $(step_output three)"
        """,
        KAI_LOCALENV_BUILD_JOBS="2",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "second first third\n"


def test_the_first_failure_stops_the_other_steps_and_is_the_last_word(tmp_path: Path) -> None:
    """A step that would run for minutes is stopped, its child process included, when another fails."""
    marker = f"kai-steps-test-{uuid.uuid4().hex}"
    result = _run(
        f"""
        long() {{ bash -c 'sleep 300; true {marker}'; touch "{tmp_path}/long-finished"; }}
        broken() {{ sleep 0.2; fail "building broken failed; see its log"; }}
        start_step long long
        start_step broken broken
        await_steps
        echo "not reached"
        """
    )
    assert result.returncode == 1
    assert result.stderr.rstrip().splitlines()[-1] == "test: building broken failed; see its log"
    assert "not reached" not in result.stdout
    assert not (tmp_path / "long-finished").exists()
    still_running = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    assert still_running.stdout == "", "the long step's child outlived the failure"


def test_a_step_that_fails_without_a_message_is_named() -> None:
    result = _run("start_step quiet false\nawait_steps")
    assert result.returncode == 1
    assert result.stderr.rstrip().splitlines()[-1] == "test: step quiet failed (exit 1)"


def test_a_number_of_jobs_that_is_not_a_number_is_refused() -> None:
    result = _run("echo started", KAI_LOCALENV_BUILD_JOBS="0")
    assert result.returncode == 1
    assert "KAI_LOCALENV_BUILD_JOBS must be a positive number, got '0'" in result.stderr
    assert result.stdout == ""
