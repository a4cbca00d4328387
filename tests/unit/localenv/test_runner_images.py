from __future__ import annotations

from pathlib import Path

import pytest

from localenv.runner_images import (
    ImageNotRunnable,
    RunnableImage,
    load_mapping,
    local_argv,
    split_repository,
)

RUNNER = RunnableImage(repository="ghcr.io/kai-scale-pipeline/runner", entrypoint=("kai-scale-runner",))


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("ghcr.io/kai-scale-pipeline/runner:v1.2", "ghcr.io/kai-scale-pipeline/runner"),
        ("ghcr.io/kai-scale-pipeline/runner", "ghcr.io/kai-scale-pipeline/runner"),
        ("localhost:5000/runner:dev", "localhost:5000/runner"),
        ("localhost:5000/runner", "localhost:5000/runner"),
        ("ghcr.io/x/runner@sha256:abc", "ghcr.io/x/runner"),
    ],
)
def test_split_repository_drops_tag_and_digest_but_not_registry_port(image: str, repository: str) -> None:
    assert split_repository(image) == repository


def test_command_replaces_entrypoint() -> None:
    argv = local_argv(image=f"{RUNNER.repository}:1", command=["sh", "-c"], args=["exit 3"], mapping=[RUNNER])
    assert argv == ["sh", "-c", "exit 3"]


def test_args_alone_follow_the_entrypoint() -> None:
    argv = local_argv(image=f"{RUNNER.repository}:1", command=None, args=["run", "x"], mapping=[RUNNER])
    assert argv == ["kai-scale-runner", "run", "x"]


def test_unknown_image_is_not_runnable_and_says_which_are() -> None:
    with pytest.raises(
        ImageNotRunnable, match=r"'busybox:1' has no local stand-in.*ghcr.io/kai-scale-pipeline/runner"
    ):
        local_argv(image="busybox:1", command=["true"], args=None, mapping=[RUNNER])


def test_shipped_mapping_runs_the_runner_image() -> None:
    assert RUNNER in load_mapping()


def test_malformed_mapping_names_file_and_entry(tmp_path: Path) -> None:
    mapping = tmp_path / "images.yaml"
    mapping.write_text("images:\n  - repository: x\n    entrypoint: run\n")
    with pytest.raises(ValueError, match=r"images.yaml: images\[0\].entrypoint must be a non-empty list"):
        load_mapping(mapping)
