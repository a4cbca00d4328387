"""localenv/images.sh: what it pushes, and the mistakes it names before it builds anything."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

IMAGES = Path(__file__).resolve().parents[3] / "localenv" / "images.sh"


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(IMAGES), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_missing_registry_argument_prints_the_usage() -> None:
    result = _run()
    assert result.returncode == 1
    assert "usage: localenv/images.sh <registry host:port>" in result.stderr


def test_building_without_a_registry_is_asked_for_by_name(tmp_path: Path) -> None:
    """``--build-only`` (make local-images) passes the usage check and meets the same checks as a push."""
    missing = tmp_path / "kai.tar.gz"
    result = _run("--build-only", KAI_SOURCE=str(missing), KAI_LOCALENV_CACHE=str(tmp_path / "cache"))
    assert result.returncode == 1
    assert "usage:" not in result.stderr
    assert f"no KAI source at {missing}: set KAI_SOURCE" in result.stderr


@pytest.mark.parametrize(
    "arguments",
    [
        ("--build-only", "--fast"),
        ("--without-local-binaries", "--build-only"),
        ("--build-only --without-local-binaries",),
    ],
)
def test_arguments_other_than_the_usages_print_the_usage(tmp_path: Path, arguments: tuple[str, ...]) -> None:
    result = _run(*arguments, KAI_LOCALENV_CACHE=str(tmp_path / "cache"))
    assert result.returncode == 1
    assert "usage: localenv/images.sh <registry host:port> | --build-only [--without-local-binaries]" in (
        result.stderr
    )


def test_a_missing_kai_source_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "kai.tar.gz"
    result = _run("127.0.0.1:5000", KAI_SOURCE=str(missing), KAI_LOCALENV_CACHE=str(tmp_path / "cache"))
    assert result.returncode == 1
    assert f"no KAI source at {missing}: set KAI_SOURCE" in result.stderr
    assert not (tmp_path / "cache").exists()


def test_a_ref_that_cannot_be_a_tag_is_refused(tmp_path: Path) -> None:
    result = _run("127.0.0.1:5000", KAI_REF="feature/x", KAI_LOCALENV_CACHE=str(tmp_path / "cache"))
    assert result.returncode == 1
    assert "KAI_REF 'feature/x' cannot be an image tag" in result.stderr


def test_a_source_tree_that_is_not_kais_is_named(tmp_path: Path) -> None:
    """A directory with a go.mod but no KAI chart, CRDs or services: refused before any build."""
    source = tmp_path / "not-kai"
    source.mkdir()
    (source / "go.mod").write_text("module example.com/not-kai\n\ngo 1.26\n")
    result = _run(
        "127.0.0.1:5000",
        KAI_SOURCE=str(source),
        KAI_COMMIT="0" * 40,
        KAI_LOCALENV_CACHE=str(tmp_path / "cache"),
    )
    assert result.returncode == 1
    assert f"{source} is not a KAI source tree: no deployments/kai-scheduler/Chart.yaml" in result.stderr
    assert "cmd/scheduler" in result.stderr
    assert not (tmp_path / "cache" / "images" / "kai-bin").exists()


@pytest.mark.parametrize("arguments", [("127.0.0.1:5000",), ("--build-only", "--without-local-binaries")])
def test_a_kai_build_that_fails_names_kai_and_its_log_and_keeps_nothing(
    tmp_path: Path, arguments: tuple[str, ...]
) -> None:
    """A KAI source tree whose operator does not compile: the error names KAI's build and its log.

    The log holds the compiler's message, and no half-built binaries stay in the cache. The tree is a
    minimal module of KAI's layout (each service a main package), built with the real Go toolchain.
    Its services compile before anything needs localenv/build.sh's binaries (the cache has none), so
    make local-images compiles them beside build.sh.
    """
    source = tmp_path / "kai"
    (source / "deployments" / "kai-scheduler" / "crds").mkdir(parents=True)
    (source / "deployments" / "kai-scheduler" / "Chart.yaml").write_text("name: kai-scheduler\n")
    (source / "deployments" / "crd-upgrader").mkdir()
    (source / "deployments" / "crd-upgrader" / "apply-crds.sh").write_text("#!/bin/sh\n")
    (source / "NOTICE").write_text("notice\n")
    (source / "go.mod").write_text("module github.com/kai-scheduler/KAI-scheduler\n\ngo 1.26\n")
    compiling = ("scheduler", "binder", "podgrouper", "podgroupcontroller", "queuecontroller", "admission")
    for service in compiling:
        (source / "cmd" / service).mkdir(parents=True)
        (source / "cmd" / service / "main.go").write_text("package main\n\nfunc main() {}\n")
    (source / "cmd" / "operator").mkdir()
    (source / "cmd" / "operator" / "main.go").write_text("package main\n\nfunc main() { undefinedCall() }\n")
    cache = tmp_path / "cache"

    result = _run(*arguments, KAI_SOURCE=str(source), KAI_COMMIT="ab" * 20, KAI_LOCALENV_CACHE=str(cache))

    log = cache / "build-logs" / "kai-services-abababababab.log"
    assert result.returncode == 1
    assert f"localenv images: building kai-services-abababababab failed; see {log}" in result.stderr
    assert "undefined: undefinedCall" in log.read_text()
    assert not list((cache / "images" / "kai-bin").iterdir())
