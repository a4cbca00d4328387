"""tools/require_debian_packages.sh: what it does when a command is there, and when it is missing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import REPO

SCRIPT = REPO / "tools" / "require_debian_packages.sh"


def _run(*pairs: str, path: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *pairs],
        env={**os.environ, "PATH": path, "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_commands_on_the_path_need_nothing(tmp_path: Path) -> None:
    result = _run("bash=bash", "env=coreutils", path=os.environ["PATH"], home=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_a_missing_command_names_its_package_when_not_root(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text("#!/bin/sh\necho 1000\n")
    (bin_dir / "id").chmod(0o755)
    result = _run(
        "bash=bash", "kai-no-such-command=kai-no-such-package", path=f"{bin_dir}:/usr/bin:/bin", home=tmp_path
    )
    assert result.returncode == 1
    assert result.stderr == (
        "missing Debian packages: kai-no-such-package; "
        "install them: sudo apt-get install kai-no-such-package\n"
    )
