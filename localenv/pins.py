"""The versions the local environment builds at, read where they are pinned, never repeated.

The local environment builds from source what the pipeline's setup installs, at the versions
include/manifests/installs.yaml pins, the Airflow image's base and helm as docker/airflow/Dockerfile
names them, and pushes the runner image where the pipeline pulls it by default
(``kai_scale_model.runner_interface``). What only the local environment pins, and both of its
scripts need, is kept here. ``python -m localenv.pins <name>...`` prints each, one a line, for
localenv/build.sh and localenv/images.sh.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from functools import cache

import yaml

from kai_scale_model import runner_interface
from kai_scale_model.installs import INSTALLS_FILE, Installs, installs_from
from localenv.paths import REPO

INSTALLS = REPO / "include" / INSTALLS_FILE
# The pipeline's Airflow image: the official image it builds on, and the helm it carries (its
# ``ARG HELM_VERSION`` default, the version a user's build downloads).
AIRFLOW_DOCKERFILE = REPO / "docker" / "airflow" / "Dockerfile"
# KWOK's module (its release is installs.yaml's): build.sh installs kwok and kwokctl from it.
KWOK_MODULE = "sigs.k8s.io/kwok"
# kwok-operator's release, as the module at the pseudo-version KAI's go.mod pins (its tag is not a
# semantic version); the module proxy serves it only without the checksum database's check.
KWOK_OPERATOR_MODULE = "github.com/run-ai/kwok-operator"
KWOK_OPERATOR_MODULE_VERSION = "v0.0.0-20240926063032-05b6364bc7c7"
# Prometheus 2.x, the release kube-prometheus-stack runs: build.sh builds its binaries, images.sh makes
# the chart's Prometheus image of them. Its module's version is v0.X.Y for release 2.X.Y.
PROMETHEUS_VERSION = "v2.54.1"
# The official Airflow chart that deploys the pipeline (deploy/airflow/values.yaml), packaged from its
# source archive: charts.py serves it, images.sh takes the official image's scripts from it.
AIRFLOW_CHART_VERSION = "1.21.0"
# The cluster DNS (localenv/manifests/coredns.yaml): the CoreDNS release kubeadm 1.34 deploys. build.sh
# builds it; the node's registry serves it under its upstream name (node.COREDNS_IMAGE).
COREDNS_VERSION = "v1.12.1"
# The pod sandbox: Kubernetes 1.34's build/pause (its Makefile's TAG). build.sh builds it from the
# kubernetes module's source; the node's registry serves it under its upstream name (node.PAUSE_IMAGE).
PAUSE_VERSION = "3.10.1"
# The chart value that pins Pyroscope's server image: the setup runs the release the local environment
# builds from its source snapshot, not the chart's appVersion.
PYROSCOPE_IMAGE_TAG = "pyroscope.image.tag"


class PinError(ValueError):
    """A file that pins versions lacks what localenv needs; the message names the file and field."""


@cache
def installs() -> Installs:
    """installs.yaml, validated as the pipeline validates it (InstallsError names the file and field)."""
    return installs_from(yaml.safe_load(INSTALLS.read_text()), path=INSTALLS)


def kwok_version() -> str:
    """KWOK's release, e.g. ``v0.8.0``."""
    return installs().kwok.version


def kwok_image() -> str:
    """The image kwok's release manifests run the controller from.

    kwok's images/kwok/Dockerfile: the static binary as the entrypoint, the same binary kwokctl runs here.
    """
    return f"registry.k8s.io/kwok/kwok:{kwok_version()}"


def kwok_release_urls() -> list[str]:
    """The URLs of KWOK's release manifests the setup applies: the controller's, then the stages'."""
    kwok = installs().kwok
    return [*kwok.manifests, *kwok.stages]


def kwok_operator_version() -> str:
    """kwok-operator's release, e.g. ``1.0.1``."""
    return installs().kwok_operator.version


def kwok_operator_release_url() -> str:
    """The URL of kwok-operator's release manifest the setup applies."""
    manifests = installs().kwok_operator.manifests
    if len(manifests) != 1:
        raise PinError(f"{INSTALLS}: kwok_operator.manifests must name one manifest, got {list(manifests)}")
    return manifests[0]


def chart_version(chart: str) -> str:
    """The version of ``chart`` the setup installs, e.g. ``0.0.73``."""
    charts = installs().charts
    if chart not in charts:
        raise PinError(f"{INSTALLS}: no charts.{chart}")
    return charts[chart].version


def chart_repository(chart: str) -> str:
    """The chart repository ``chart`` is installed from (installs.yaml's ``repo``)."""
    charts = installs().charts
    repository = charts[chart].repo if chart in charts else None
    if not repository:
        raise PinError(f"{INSTALLS}: no charts.{chart}.repo")
    return repository


def pyroscope_version() -> str:
    """The Pyroscope server the setup runs (its chart's ``pyroscope.image.tag``), e.g. ``2.2.1``."""
    pinned = installs().charts.get("pyroscope")
    tag = pinned.values.get(PYROSCOPE_IMAGE_TAG) if pinned else None
    if not tag:
        raise PinError(f"{INSTALLS}: no charts.pyroscope.set.{PYROSCOPE_IMAGE_TAG}")
    return str(tag)


def _in_airflow_dockerfile(pattern: str, *, expected: str) -> str:
    """What ``pattern``'s group matches on a line of the Airflow image's Dockerfile."""
    found = re.search(pattern, AIRFLOW_DOCKERFILE.read_text(), flags=re.MULTILINE)
    if not found:
        raise PinError(f"{AIRFLOW_DOCKERFILE}: no line '{expected}'")
    return found.group(1)


def helm_version() -> str:
    """The helm the Airflow image carries, e.g. ``v3.19.5``."""
    return _in_airflow_dockerfile(r"^ARG HELM_VERSION=(\S+)$", expected="ARG HELM_VERSION=<version>")


def airflow_base_image() -> str:
    """The official image the Airflow image builds on, by its full name (on Docker Hub)."""
    image = _in_airflow_dockerfile(r"^FROM (apache/airflow:\S+)$", expected="FROM apache/airflow:<tag>")
    return f"docker.io/{image}"


def airflow_chart_archive() -> str:
    """The official Airflow chart's source archive in the vendor directory."""
    return f"apache-airflow-chart-{AIRFLOW_CHART_VERSION}.tar.gz"


SCRIPT_PINS: dict[str, Callable[[], str]] = {
    "kwok": kwok_version,
    "kwok-operator": kwok_operator_version,
    "kwok-operator-module": lambda: KWOK_OPERATOR_MODULE,
    "kwok-operator-module-version": lambda: KWOK_OPERATOR_MODULE_VERSION,
    "fake-gpu-operator": lambda: chart_version("fake-gpu-operator"),
    "prometheus": lambda: PROMETHEUS_VERSION,
    "coredns": lambda: COREDNS_VERSION,
    "pause": lambda: PAUSE_VERSION,
    "pyroscope": pyroscope_version,
    "runner-image": lambda: runner_interface.IMAGE_REPOSITORY,
    "helm": helm_version,
    "airflow-base-image": airflow_base_image,
    "airflow-chart-archive": airflow_chart_archive,
}
"""What the scripts read, by the name they ask for."""


def main(names: Sequence[str]) -> int:
    """Print each named pin, one a line; 2 and the usage for a name it does not know."""
    unknown = [name for name in names if name not in SCRIPT_PINS]
    if not names or unknown:
        print(
            f"usage: python -m localenv.pins <name>..., each one of {', '.join(SCRIPT_PINS)}"
            + (f"; unknown: {', '.join(unknown)}" if unknown else ""),
            file=sys.stderr,
        )
        return 2
    for name in names:
        print(SCRIPT_PINS[name]())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
