"""The release manifests the pipeline's setup applies, served from disk as their mirror.

This machine cannot download the release assets that include/manifests/installs.yaml names, so they
are rendered here from the same sources their releases are rendered from (kustomize of kwok's
``kustomize/`` tree and of kwok-operator's ``config/default``, each with the release's image tag) under
``<mirror>/github.com/<path of the asset>``.
The local deployment's ``KAI_SCALE_SOURCE_MIRRORS`` points ``https://github.com/`` there: ``file://`` on
this machine, and over HTTP (the environment's ``mirror`` component) for the Airflow deployment's pods.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from localenv import pins, processes
from localenv.processes import ComponentError

GITHUB = "https://github.com/"
NAME = "mirror"


# The kustomize directory of kwok's module each of its release assets is built from, by file name.
KWOK_ASSET_SOURCES = {"kwok.yaml": "kustomize/kwok", "stage-fast.yaml": "kustomize/stage/fast"}


def kwok_release_assets() -> dict[str, str]:
    """The release assets of kwok the setup applies, by URL, and the kustomize directory of each."""
    assets = {}
    for url in pins.kwok_release_urls():
        name = url.rsplit("/", 1)[-1]
        if name not in KWOK_ASSET_SOURCES:
            raise ComponentError(
                f"{pins.INSTALLS} names kwok's release asset {url}, which the local environment cannot "
                f"render: it renders {', '.join(KWOK_ASSET_SOURCES)}"
            )
        assets[url] = KWOK_ASSET_SOURCES[name]
    return assets


def write_releases(*, mirror: Path, kubectl: Callable[..., str]) -> None:
    """Render kwok-operator's and kwok's release manifests into the mirror."""
    write_kwok_operator_release(mirror=mirror, kubectl=kubectl)
    write_kwok_release(mirror=mirror, kubectl=kubectl)


def write_kwok_release(*, mirror: Path, kubectl: Callable[..., str]) -> list[Path]:
    """Render kwok's release manifests into the mirror; returns the files written.

    As kwok's own release renders them: kustomize, with the controller's image set to the release's tag.
    """
    kwok_module = module_dir(pins.KWOK_MODULE, pins.kwok_version())
    image = pins.kwok_image()
    written = []
    for url, directory in kwok_release_assets().items():
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


def module_dir(module: str, version: str) -> Path:
    """The module's directory in Go's module cache, downloaded by version if missing."""
    result = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GOTOOLCHAIN": "local", "GONOSUMDB": "github.com/run-ai", "GOFLAGS": "-mod=mod"},
    )
    directory = json.loads(result.stdout or "{}").get("Dir") if result.returncode == 0 else None
    if not directory:
        raise ComponentError(
            f"cannot download {module}@{version}: {result.stdout.strip()} {result.stderr.strip()}"
        )
    return Path(directory)


def write_kwok_operator_release(*, mirror: Path, kubectl: Callable[..., str]) -> Path:
    """Render kwok-operator's release manifest (its kustomize ``config/default``) into the mirror."""
    module = module_dir(pins.KWOK_OPERATOR_MODULE, pins.KWOK_OPERATOR_MODULE_VERSION)
    path = mirror / pins.kwok_operator_release_url().removeprefix("https://")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(kubectl("kustomize", str(module / "config" / "default")))
    return path


def mirror_rule(mirror: Path) -> dict[str, str]:
    """The ``KAI_SCALE_SOURCE_MIRRORS`` rule that sends GitHub's release assets to the mirror."""
    return {"upstream": GITHUB, "mirror": f"file://{mirror / 'github.com'}/"}


def http_mirror_rule(served_at: str) -> dict[str, str]:
    """The same rule for the mirror directory served over HTTP at ``served_at`` (ending in ``/``)."""
    return {"upstream": GITHUB, "mirror": f"{served_at}github.com/"}


@dataclass(frozen=True, kw_only=True)
class MirrorServer:
    """The mirror's directory over HTTP (Python's http.server), for the Airflow deployment's worker pods."""

    directory: Path
    port: int
    logs_dir: Path
    run_dir: Path

    def start(self) -> None:
        """Serve ``directory`` on every address (the guard lets only loopback and the pod bridge in)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "http.server", str(self.port), "--bind", "0.0.0.0"]
        argv += ["--directory", str(self.directory)]
        processes.start(name=NAME, argv=argv, log_dir=self.logs_dir, run_dir=self.run_dir)

    def running(self) -> bool:
        """Whether it serves."""
        return processes.running_pid(name=NAME, run_dir=self.run_dir) is not None

    def stop(self) -> None:
        """Stop serving."""
        processes.stop(name=NAME, run_dir=self.run_dir)
