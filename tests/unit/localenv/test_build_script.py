"""localenv/build.sh's failures: each names what is wrong and where its log is, and leaves nothing behind."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

LOCALENV = Path(__file__).resolve().parents[3] / "localenv"
BUILD = LOCALENV / "build.sh"


def _pinned_kubernetes() -> str:
    go_mod = (LOCALENV / "go" / "kubernetes" / "go.mod").read_text().split()
    return go_mod[go_mod.index("k8s.io/kubernetes") + 1]


def _run(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(BUILD), *arguments], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_an_unknown_argument_prints_the_usage(tmp_path: Path) -> None:
    result = _run({**os.environ, "KAI_LOCALENV_CACHE": str(tmp_path)}, "images")
    assert result.returncode == 1
    assert "usage: localenv/build.sh [helm | debian-packages]" in result.stderr
    assert not (tmp_path / "bin").exists()


def test_missing_go_toolchain_is_named(tmp_path: Path) -> None:
    result = _run({"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KAI_LOCALENV_CACHE": str(tmp_path)})
    assert result.returncode == 1
    assert "no Go toolchain on PATH" in result.stderr


def test_failed_build_names_the_component_and_its_log(tmp_path: Path) -> None:
    """No module can be fetched (GOPROXY=off, empty module cache), so the first build fails."""
    env = {
        **os.environ,
        "KAI_LOCALENV_CACHE": str(tmp_path / "cache"),
        "GOMODCACHE": str(tmp_path / "modcache"),
        "GOCACHE": str(tmp_path / "gocache"),
        "GOPROXY": "off",
        "GOFLAGS": "-mod=mod",
    }
    result = _run(env)
    version = _pinned_kubernetes()
    log = tmp_path / "cache" / "build-logs" / f"kubernetes-{version}.log"
    assert result.returncode == 1
    assert f"building kubernetes {version} failed; see {log}" in result.stderr
    assert "module lookup disabled" in log.read_text()
    assert not (tmp_path / "cache" / "bin").exists() or not any((tmp_path / "cache" / "bin").iterdir())
    subprocess.run(["chmod", "-R", "u+w", str(tmp_path)], check=True)  # Go makes its module cache read-only


def test_an_unpinned_component_stops_the_build_before_it_starts(tmp_path: Path) -> None:
    """A go.mod that does not pin its module is named; nothing is built with an empty version."""
    script = tmp_path / "localenv" / "build.sh"
    (tmp_path / "localenv" / "go" / "kubernetes").mkdir(parents=True)
    (tmp_path / "localenv" / "go" / "kubernetes" / "go.mod").write_text("module wrapper\n\ngo 1.25.0\n")
    script.write_text(BUILD.read_text())
    env = {**os.environ, "KAI_LOCALENV_CACHE": str(tmp_path / "cache"), "GOPROXY": "off"}
    result = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 1
    assert "go/kubernetes/go.mod does not require k8s.io/kubernetes" in result.stderr
    assert "building" not in result.stderr
