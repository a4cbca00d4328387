"""The schema of ``include/manifests/installs.yaml``: what the setup installs, at pinned versions.

The pipeline's setup installs from it and the local environment builds at its versions, so both
validate it here; an error names the file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from kai_scale_model.validation import StrictModel, validated

INSTALLS_FILE = Path("manifests") / "installs.yaml"
"""Where it lives, under the ``include/`` directory."""


class InstallsError(ValueError):
    """An installs file that cannot be used; the message names the file and the field."""


class ReleaseInstall(StrictModel):
    """A release installed from its release manifests, applied from their URLs."""

    version: str = Field(description="the release, as its publisher names it (``v0.8.0``, ``1.0.1``)")
    manifests: Annotated[tuple[str, ...], Field(min_length=1)] = Field(
        description="URLs of the release's manifests, applied in order"
    )


class KwokInstall(ReleaseInstall):
    """KWOK: its release manifests, and the stages applied on every run."""

    stages: tuple[str, ...] = Field(description="URLs of the stages' manifests, applied on every run")
    delete_stages: tuple[str, ...] = Field(description="names of stages deleted after they are applied")


class ChartInstall(StrictModel):
    """A chart installed with helm."""

    chart: str = Field(description="the chart's reference: ``oci://...``, or its name in ``repo``")
    repo: str | None = Field(default=None, description="the chart repository's URL, for a chart by name")
    version: str = Field(description="the chart's pinned version")
    namespace: str = Field(description="the release's namespace")
    values: dict[str, str] = Field(
        default_factory=dict, alias="set", description="helm's ``--set`` values, as strings"
    )
    delete_deployments: tuple[str, ...] = Field(
        default=(), description="names of the release's Deployments deleted after it is installed"
    )


class Installs(StrictModel):
    """The whole file."""

    kwok: KwokInstall
    kwok_operator: ReleaseInstall
    charts: dict[str, ChartInstall] = Field(description="charts by release name")


def installs_from(document: object, *, path: Path) -> Installs:
    """``document``, the parsed YAML of ``path``, validated; InstallsError names the file and each field."""
    return validated(Installs, document, what=f"installs file {path}", error=InstallsError)
