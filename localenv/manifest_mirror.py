"""The release manifests the pipeline's setup applies, served from disk as their mirror.

This machine cannot download the release assets that include/manifests/installs.yaml names, so they
are rendered here from the same sources their releases are rendered from (kustomize of the module's
``kustomize/`` tree, with the release's image tag) under ``<mirror>/github.com/<path of the asset>``.
The local deployment's ``KAI_SCALE_SOURCE_MIRRORS`` points ``https://github.com/`` there (``file://``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml

GITHUB = "https://github.com/"


def kwok_release_assets(version: str) -> dict[str, str]:
    """The release assets of kwok by URL, and the kustomize directory of the module each is built from."""
    base = f"{GITHUB}kubernetes-sigs/kwok/releases/download/{version}"
    return {f"{base}/kwok.yaml": "kustomize/kwok", f"{base}/stage-fast.yaml": "kustomize/stage/fast"}


def write_kwok_release(
    *, mirror: Path, kwok_module: Path, version: str, image: str, kubectl: Callable[..., str]
) -> list[Path]:
    """Render kwok's release manifests into the mirror; returns the files written.

    As kwok's own release renders them: kustomize, with the controller's image set to the release's tag.
    """
    written = []
    for url, directory in kwok_release_assets(version).items():
        with tempfile.TemporaryDirectory() as scratch:
            # A kustomization of our own over the module's directory, which is read-only.
            kustomization = {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                # Relative: kustomize refuses an absolute root.
                "resources": [os.path.relpath(kwok_module / directory, scratch)],
                "images": [{"name": image.rsplit(":", 1)[0], "newTag": image.rsplit(":", 1)[1]}],
            }
            (Path(scratch) / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
            rendered = kubectl("kustomize", "--load-restrictor=LoadRestrictionsNone", scratch)
        path = mirror / url.removeprefix("https://")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rendered)
        written.append(path)
    return written


def mirror_rule(mirror: Path) -> dict[str, str]:
    """The ``KAI_SCALE_SOURCE_MIRRORS`` rule that sends GitHub's release assets to the mirror."""
    return {"upstream": GITHUB, "mirror": f"file://{mirror / 'github.com'}/"}
