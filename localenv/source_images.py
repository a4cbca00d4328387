"""The images built from source, and the record of what the registry holds of them.

``localenv/images.sh`` builds (cached by their inputs) the runner's, KAI's, the Airflow, the
monitoring stack's and the other images the environment runs, pushes them to the local registry and
says what it pushed in its last lines, ``key=value``. That record (``images.env`` in the state
directory) is what KAI's install (localenv.kai), the Airflow deployment (localenv.airflow) and the
tests read: the image references as pushed, and the KAI source tree whose chart is installed.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from localenv.processes import ComponentError

IMAGES_SCRIPT = Path(__file__).with_name("images.sh")


@dataclass(frozen=True, kw_only=True)
class BuiltImages:
    """What localenv/images.sh pushed (its last lines, ``key=value``)."""

    runner: str
    """The runner image, ``<registry>/<repository>:<tag>@<digest>``."""
    kai_commit: str
    kai_source: Path
    """The KAI source tree the images were built from: its chart is installed."""
    kai_image_repository: str
    kai_image_tag: str
    airflow_image: str
    """The pipeline's Airflow image, ``<repository>:<tag>`` under its upstream name."""

    @classmethod
    def parse(cls, output: str) -> BuiltImages:
        """Read images.sh's output; a missing key is a ComponentError naming it."""
        values = dict(line.split("=", 1) for line in output.splitlines() if "=" in line)
        keys = [
            *("runner", "kai_commit", "kai_source"),
            *("kai_image_repository", "kai_image_tag", "airflow_image"),
        ]
        missing = [key for key in keys if not values.get(key)]
        if missing:
            raise ComponentError(f"images: localenv/images.sh did not report {', '.join(missing)}")
        return cls(
            runner=values["runner"],
            kai_commit=values["kai_commit"],
            kai_source=Path(values["kai_source"]),
            kai_image_repository=values["kai_image_repository"],
            kai_image_tag=values["kai_image_tag"],
            airflow_image=values["airflow_image"],
        )


@dataclass(frozen=True, kw_only=True)
class SourceImages:
    """The images of this environment: images.sh's build and push, and the record of the last push."""

    record: Path
    logs_dir: Path
    script: Path = IMAGES_SCRIPT

    def build_and_push(self, registry: str) -> BuiltImages:
        """Build what changed (the rest is cached), push all to ``registry`` (host:port) and record it."""
        log_path = self.logs_dir / "images.log"
        with log_path.open("ab") as log:
            result = subprocess.run(
                [str(self.script), registry], stdout=subprocess.PIPE, stderr=log, check=False
            )
            log.write(result.stdout)
        if result.returncode != 0:
            # images.sh's own last word names the step and its build log.
            said = [
                line
                for line in log_path.read_text(errors="replace").splitlines()
                if line.startswith("localenv images: ")
            ]
            reason = said[-1].removeprefix("localenv images: ") if said else "see the log"
            raise ComponentError(
                f"images: building or pushing the images from source failed: {reason} ({log_path})"
            )
        pushed = BuiltImages.parse(result.stdout.decode())  # checks that it reported everything
        self.record.write_bytes(result.stdout)
        return pushed

    def built(self) -> BuiltImages:
        """What images.sh last pushed for this environment."""
        if not self.record.exists():
            raise ComponentError(f"no images built for this environment ({self.record}): run `make local-up`")
        return BuiltImages.parse(self.record.read_text())
