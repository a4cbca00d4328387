"""Helm charts served by the local registry, as OCI charts under their upstream names.

A scale-test cluster's setup installs its charts from their publishers; here the same charts are
packaged from the source snapshots (``KAI_LOCALENV_VENDOR_DIR``, default ``../shared/vendor`` beside
the repository: the archives that ``../shared/vendor/README.md`` lists) and pushed once to
``<registry>/<upstream repository>/<chart>:<version>``, where a chart mirror setting can point helm.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localenv import pins
from localenv.paths import REPO
from localenv.processes import ComponentError

DEFAULT_VENDOR_DIR = REPO.parent / "shared" / "vendor"


@dataclass(frozen=True)
class VendorChart:
    """A chart in a source archive, and where its publisher serves it as an OCI chart."""

    name: str
    version: str
    archive: str
    """The archive's file name in the vendor directory."""
    path: str
    """The chart's directory inside the archive."""
    oci_repository: str
    """The publisher's OCI repository of the chart, without the chart's name."""
    dependencies: tuple[str, ...] = ()
    """Directories in the archive of the charts it depends on (helm wants them in its charts/)."""
    stamp_version: bool = False
    """Whether the source's Chart.yaml has a placeholder version that the release sets."""
    absent_dependencies: tuple[str, ...] = ()
    """Dependencies its release bundles but its source lacks, all behind a condition that the values
    turn off: helm wants a chart of each name in charts/ even then, so an empty one takes its place."""

    @property
    def reference(self) -> str:
        """``<repository>/<name>``: the chart's upstream OCI reference, without ``oci://``."""
        return f"{self.oci_repository}/{self.name}"


# The versions include/manifests/installs.yaml pins.
_FAKE_GPU_OPERATOR = pins.chart_version("fake-gpu-operator")
_KUBE_PROMETHEUS_STACK = pins.chart_version("kube-prometheus-stack")
VENDOR_CHARTS = (
    VendorChart(
        name="fake-gpu-operator",
        version=_FAKE_GPU_OPERATOR,
        archive=f"fake-gpu-operator-v{_FAKE_GPU_OPERATOR}.tar.gz",
        path=f"fake-gpu-operator-v{_FAKE_GPU_OPERATOR}/deploy/fake-gpu-operator",
        oci_repository="ghcr.io/run-ai/fake-gpu-operator",
        # "version: 0.0.1 # Replaced during CD"
        stamp_version=True,
    ),
    VendorChart(
        name="kube-prometheus-stack",
        version=_KUBE_PROMETHEUS_STACK,
        archive=f"kube-prometheus-stack-{_KUBE_PROMETHEUS_STACK}-charts.tar.gz",
        path="charts/kube-prometheus-stack",
        oci_repository="ghcr.io/prometheus-community/charts",
        dependencies=(
            "charts/kube-state-metrics",
            "charts/prometheus-node-exporter",
            "charts/grafana",
            "charts/prometheus-windows-exporter",
        ),
    ),
)
# The official Apache Airflow chart (the deployment's, deploy/airflow/values.yaml). Its release, from
# airflow.apache.org, bundles Bitnami's postgresql chart; its source does not, and the deployment turns
# it off (postgresql.enabled: false, an external database).
AIRFLOW_CHART = VendorChart(
    name="airflow",
    version=pins.AIRFLOW_CHART_VERSION,
    archive=pins.airflow_chart_archive(),
    path="apache-airflow/chart",
    oci_repository="airflow.apache.org/charts",
    absent_dependencies=("postgresql",),
)
# The OCI registries the charts come from: the setup's source mirrors point them at the local registry.
CHART_REGISTRIES = tuple(sorted({chart.oci_repository.split("/", 1)[0] for chart in VENDOR_CHARTS}))


@dataclass(frozen=True)
class RepositoryChart:
    """A chart in a source archive whose publisher serves it from a chart repository over HTTPS.

    The local environment serves it from the mirror directory as a chart repository of its own (the
    packaged chart and an ``index.yaml``), at ``<mirror>/<host and path of the repository>/``.
    """

    name: str
    version: str
    archive: str
    path: str
    """The chart's directory inside the archive; its dependencies are packaged in its charts/."""
    repository: str
    """The publisher's chart repository, as include/manifests/installs.yaml names it."""

    @property
    def mirror_path(self) -> str:
        """The repository's place under the mirror directory: its URL without the scheme."""
        return self.repository.split("://", 1)[1].rstrip("/")


# Pyroscope's chart, from the server's source snapshot (it moved into grafana/pyroscope).
_PYROSCOPE = pins.pyroscope_version()
PYROSCOPE_CHART = RepositoryChart(
    name="pyroscope",
    version=pins.chart_version("pyroscope"),
    archive=f"pyroscope-{_PYROSCOPE}.tar.gz",
    path=f"pyroscope-{_PYROSCOPE}/operations/pyroscope/helm/pyroscope",
    repository=pins.chart_repository("pyroscope"),
)


def vendor_dir() -> Path:
    """Where the source archives are: ``KAI_LOCALENV_VENDOR_DIR`` or ``../shared/vendor``."""
    return Path(os.environ.get("KAI_LOCALENV_VENDOR_DIR", DEFAULT_VENDOR_DIR))


class ChartPusher:
    """Packages the vendor charts with helm and pushes those the registry lacks."""

    def __init__(self, *, helm: Path, registry: str, vendor: Path, mirror: Path, log_path: Path) -> None:
        self.helm = helm
        self.registry = registry
        self.vendor = vendor
        self.mirror = mirror
        self.log_path = log_path

    def push_all(self) -> None:
        """Every chart of VENDOR_CHARTS and the Airflow chart once; Pyroscope's into the mirror."""
        for chart in (*VENDOR_CHARTS, AIRFLOW_CHART):
            if not self.has(chart):
                self.push(chart)
        self.serve_from_mirror(PYROSCOPE_CHART)

    def serve_from_mirror(self, chart: RepositoryChart) -> None:
        """The chart packaged into its repository under the mirror directory, indexed, once."""
        repository = self.mirror / chart.mirror_path
        if (repository / f"{chart.name}-{chart.version}.tgz").exists():
            return
        archive = self.vendor / chart.archive
        if not archive.exists():
            raise ComponentError(
                f"charts: {archive} not found; set KAI_LOCALENV_VENDOR_DIR to a directory holding "
                f"{chart.archive} (the source snapshot of {chart.name}, see docs/local-environment.md)"
            )
        repository.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as scratch:
            with tarfile.open(archive) as source:
                source.extractall(scratch, filter=_only(chart.path))
            self._helm("package", str(Path(scratch) / chart.path), "--destination", str(repository))
        # Relative URLs: helm finds the package beside the index, wherever the mirror is served.
        self._helm("repo", "index", str(repository))
        if not (repository / f"{chart.name}-{chart.version}.tgz").exists():
            raise ComponentError(f"charts: {chart.archive} holds no {chart.name} {chart.version}")

    def has(self, chart: VendorChart) -> bool:
        """Whether the registry serves the chart at its version."""
        result = self._helm("show", "chart", self.oci_url(chart), "--version", chart.version, check=False)
        return result.returncode == 0

    def oci_url(self, chart: VendorChart) -> str:
        """``oci://<registry>/<upstream reference>``, as helm pulls it."""
        return f"oci://{self.registry}/{chart.reference}"

    def push(self, chart: VendorChart) -> None:
        """Package the chart from its archive (its dependencies beside it) and push it."""
        with tempfile.TemporaryDirectory() as scratch:
            packaged = self.package(chart, Path(scratch))
            self._helm("push", str(packaged), f"oci://{self.registry}/{chart.oci_repository}")

    def package(self, chart: VendorChart, work: Path) -> Path:
        """The chart packaged from its archive in ``work``, its dependencies beside it: the .tgz."""
        archive = self.vendor / chart.archive
        if not archive.exists():
            raise ComponentError(
                f"charts: {archive} not found; set KAI_LOCALENV_VENDOR_DIR to a directory holding "
                f"{chart.archive} (a `git archive` of the chart's source, see docs/local-environment.md)"
            )
        with tarfile.open(archive) as source:
            source.extractall(work, filter="data")
        chart_dir = work / chart.path
        for dependency in chart.dependencies:
            shutil.copytree(work / dependency, chart_dir / "charts" / Path(dependency).name)
        for name in chart.absent_dependencies:
            empty = chart_dir / "charts" / name
            empty.mkdir(parents=True)
            (empty / "Chart.yaml").write_text(
                f"apiVersion: v2\nname: {name}\nversion: 0.0.0\n"
                "description: empty stand-in for a dependency the source lacks and the values turn off\n"
            )
        package = ["package", str(chart_dir), "--destination", str(work)]
        if chart.stamp_version:
            package += ["--version", chart.version, "--app-version", chart.version]
        self._helm(*package)
        packaged = work / f"{chart.name}-{chart.version}.tgz"
        if not packaged.exists():
            raise ComponentError(f"charts: {chart.archive} holds no {chart.name} {chart.version}")
        return packaged

    def _helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        # The registry speaks plain HTTP, on loopback.
        argv = [str(self.helm), *args, *(["--plain-http"] if args[0] in {"push", "show"} else [])]
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        with self.log_path.open("a") as log:
            log.write(f"$ {' '.join(argv)}\n{result.stdout}{result.stderr}")
        if check and result.returncode != 0:
            raise ComponentError(f"charts: helm {' '.join(args[:2])} failed; see {self.log_path}")
        return result


def _only(prefix: str) -> Callable[[tarfile.TarInfo, str], tarfile.TarInfo | None]:
    """A tarfile extraction filter: the members under ``prefix`` (a 1.3 GB tree holds a small chart)."""

    def keep(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        if member.name != prefix and not member.name.startswith(f"{prefix}/"):
            return None
        return tarfile.data_filter(member, path)

    return keep
