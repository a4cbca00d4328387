"""The explicit mapping from container images to local commands used by the runner node's kubelet double."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

DEFAULT_MAPPING_FILE = Path(__file__).with_name("runner_images.yaml")


class ImageNotRunnable(ValueError):
    """The image has no local stand-in; the pod fails the way an image that cannot be pulled does."""


@dataclass(frozen=True, kw_only=True)
class RunnableImage:
    """An image whose containers run as local processes."""

    repository: str
    """Image reference without tag or digest, e.g. ``ghcr.io/kai-scale-pipeline/runner``."""
    entrypoint: tuple[str, ...]
    """The image's ENTRYPOINT: the command when the container sets none."""


def split_repository(image: str) -> str:
    """The image reference without its tag or digest."""
    name = image.split("@", 1)[0]
    last_slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > last_slash else name


def load_mapping(path: Path = DEFAULT_MAPPING_FILE) -> tuple[RunnableImage, ...]:
    """Read the mapping file; an error names the file and the entry."""
    document = yaml.safe_load(path.read_text())
    entries = document.get("images") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a top-level 'images' list")
    images = []
    for index, entry in enumerate(entries):
        repository = entry.get("repository") if isinstance(entry, dict) else None
        entrypoint = entry.get("entrypoint") if isinstance(entry, dict) else None
        if not isinstance(repository, str) or not repository:
            raise ValueError(f"{path}: images[{index}].repository must be a non-empty string")
        if not (isinstance(entrypoint, list) and entrypoint and all(isinstance(a, str) for a in entrypoint)):
            raise ValueError(f"{path}: images[{index}].entrypoint must be a non-empty list of strings")
        images.append(RunnableImage(repository=repository, entrypoint=tuple(entrypoint)))
    return tuple(images)


def local_argv(
    *,
    image: str,
    command: Sequence[str] | None,
    args: Sequence[str] | None,
    mapping: Sequence[RunnableImage],
) -> list[str]:
    """The argv a container of ``image`` runs, following Kubernetes' command/args rules."""
    repository = split_repository(image)
    for runnable in mapping:
        if runnable.repository == repository:
            # As in Kubernetes: command replaces ENTRYPOINT; args alone are appended to ENTRYPOINT.
            argv = list(command) if command else list(runnable.entrypoint)
            return argv + list(args or ())
    known = ", ".join(sorted(r.repository for r in mapping)) or "none"
    raise ImageNotRunnable(
        f"image {image!r} has no local stand-in on the runner node (known: {known}); "
        f"add it to {DEFAULT_MAPPING_FILE.name} or use the runner image"
    )
