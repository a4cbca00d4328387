"""The local OCI registry: serves the real node every image under its upstream name.

containerd's mirror configuration (``localenv.node_config``) sends a pull of ``<upstream>/<path>:<tag>`` to
``<registry>/<upstream>/<path>:<tag>``, so manifests and charts keep their real image references.
The registry's storage lives in the build cache, so images survive ``make local-down``.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from localenv import processes
from localenv.processes import ComponentError

COMPONENT = "registry"


@dataclass(frozen=True)
class StaticImage:
    """An image of one static binary on an empty base, as Kubernetes' pause and CoreDNS' images are."""

    reference: str
    """The upstream reference the cluster uses, e.g. ``registry.k8s.io/pause:3.10.1``."""
    binary: Path
    """The binary, built by localenv/build.sh for this machine's platform."""
    path_in_image: str
    arguments: tuple[str, ...] = ()


class LocalRegistry:
    """The registry process and the images pushed into it."""

    def __init__(self, *, bin_dir: Path, storage: Path, port: int, logs_dir: Path, run_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.storage = storage
        self.port = port
        self.logs_dir = logs_dir
        self.run_dir = run_dir

    @property
    def address(self) -> str:
        """host:port on loopback."""
        return f"127.0.0.1:{self.port}"

    def running(self) -> bool:
        """Whether the registry process runs."""
        return processes.running_pid(name=COMPONENT, run_dir=self.run_dir) is not None

    def start(self) -> None:
        """Serve ``storage`` over plain HTTP (loopback and the pod bridge)."""
        self.storage.mkdir(parents=True, exist_ok=True)
        config = self.run_dir / "registry.yml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(
            yaml.safe_dump(
                {
                    "version": 0.1,
                    "log": {"level": "warn"},
                    "storage": {
                        "filesystem": {"rootdirectory": str(self.storage)},
                        "delete": {"enabled": True},
                    },
                    # Every address: helm in the Airflow deployment's worker pods pulls the charts on
                    # the bridge; the pod network's guard lets only loopback and the bridge in.
                    "http": {"addr": f":{self.port}"},
                }
            )
        )
        processes.start(
            name=COMPONENT,
            argv=[str(self.bin_dir / "registry"), "serve", str(config)],
            log_dir=self.logs_dir,
            run_dir=self.run_dir,
            # Tracing is on by default and would try to export spans.
            env={**os.environ, "OTEL_TRACES_EXPORTER": "none", "OTEL_SDK_DISABLED": "true"},
        )
        processes.wait_until_listening(
            name=COMPONENT, port=self.port, timeout=30, log_dir=self.logs_dir, run_dir=self.run_dir
        )

    def stop(self) -> None:
        """Stop serving (the storage stays)."""
        processes.stop(name=COMPONENT, run_dir=self.run_dir)

    def local_reference(self, upstream_reference: str) -> str:
        """Where the registry holds an upstream image: ``<registry>/<upstream reference>``."""
        return f"{self.address}/{upstream_reference}"

    def has(self, upstream_reference: str) -> bool:
        """Whether the image is already pushed."""
        result = self._crane("digest", self.local_reference(upstream_reference), check=False)
        return result.returncode == 0

    def digest(self, upstream_reference: str) -> str:
        """The digest of the image the registry serves under that name."""
        return self._crane("digest", self.local_reference(upstream_reference)).stdout.strip()

    def push_static_image(self, image: StaticImage) -> None:
        """Pack the binary as a one-layer image for linux/amd64 and push it (once)."""
        if self.has(image.reference):
            return
        # Built under a staging tag: the image's tag appears only whole (has() would keep a half one).
        staging = self.local_reference(f"kai-scale-staging/{image.reference.rsplit('/', 1)[-1]}")
        with _one_file_layer(image.binary, image.path_in_image) as layer:
            self._crane("append", "--oci-empty-base", "-f", str(layer), "-t", staging)
        mutate = ["mutate", staging, f"--entrypoint={image.path_in_image}", "--set-platform=linux/amd64"]
        if image.arguments:
            mutate.append(f"--cmd={','.join(image.arguments)}")
        self._crane(*mutate, "-t", self.local_reference(image.reference))

    def push_with_file(self, *, base: str, reference: str, file: Path, path_in_image: str) -> None:
        """Push the image ``base`` with one more file (its mode kept) as ``reference``."""
        with _one_file_layer(file, path_in_image) as layer:
            self._crane(
                "append",
                f"--base={self.local_reference(base)}",
                "-f",
                str(layer),
                "-t",
                self.local_reference(reference),
            )

    def _crane(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.bin_dir / "crane"), "--insecure", *args], capture_output=True, text=True, check=False
        )
        if check and result.returncode != 0:
            raise ComponentError(f"crane {' '.join(args)} failed: {result.stderr.strip()}")
        return result


@contextmanager
def _one_file_layer(file: Path, path_in_image: str) -> Iterator[Path]:
    """An image layer (a tar file) holding ``file`` at ``path_in_image``, owned by root."""
    with tempfile.TemporaryDirectory() as scratch:
        layer = Path(scratch) / "layer.tar"
        with tarfile.open(layer, "w") as archive:
            info = archive.gettarinfo(str(file.resolve()), arcname=path_in_image.lstrip("/"))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with file.open("rb") as content:
                archive.addfile(info, content)
        yield layer
