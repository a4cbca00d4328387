"""localenv.pins: the scripts read the versions the pipeline pins, where it pins them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kai_scale.cluster.installs import read_installs
from kai_scale.settings import DEFAULT_RUNNER_IMAGE
from localenv import pins
from localenv.environment import coredns_manifest
from localenv.node_config import COREDNS_IMAGE, PAUSE_IMAGE
from tests.conftest import REPO


def test_the_scripts_read_the_pipelines_pins(capsys: pytest.CaptureFixture[str]) -> None:
    installs = read_installs(REPO / "include")
    assert pins.main(["kwok", "kwok-operator", "fake-gpu-operator", "runner-image"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        installs.kwok.version,
        installs.kwok_operator.version,
        installs.charts["fake-gpu-operator"].version,
        DEFAULT_RUNNER_IMAGE,
    ]


def test_the_release_manifests_are_the_ones_the_setup_applies() -> None:
    installs = read_installs(REPO / "include")
    assert pins.kwok_release_urls() == [*installs.kwok.manifests, *installs.kwok.stages]
    assert (pins.kwok_operator_release_url(),) == installs.kwok_operator.manifests


def test_an_unknown_name_prints_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert pins.main(["kwok", "kwk"]) == 2
    assert capsys.readouterr().err.startswith("usage: python -m localenv.pins <name>..., each one of kwok,")


def test_the_pyroscope_server_is_the_chart_image_tag_installs_yaml_pins(
    capsys: pytest.CaptureFixture[str],
) -> None:
    installs = read_installs(REPO / "include")
    assert pins.main(["pyroscope"]) == 0
    assert capsys.readouterr().out.strip() == installs.charts["pyroscope"].values["pyroscope.image.tag"]


def test_the_scripts_read_the_airflow_images_base_and_helm_from_its_dockerfile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One pin each: a user's `docker build` downloads that helm; the local environment builds it."""
    dockerfile = (REPO / "docker" / "airflow" / "Dockerfile").read_text().splitlines()
    assert pins.main(["helm", "airflow-base-image", "airflow-chart-archive"]) == 0
    helm, base, chart_archive = capsys.readouterr().out.splitlines()
    assert f"ARG HELM_VERSION={helm}" in dockerfile
    assert base.startswith("docker.io/apache/airflow:")
    assert f"FROM {base.removeprefix('docker.io/')}" in dockerfile
    assert chart_archive == f"apache-airflow-chart-{pins.AIRFLOW_CHART_VERSION}.tar.gz"


def test_a_dockerfile_without_the_pin_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM apache/airflow:3.3.2-python3.11\nARG HELM_VERSION\n")
    monkeypatch.setattr(pins, "AIRFLOW_DOCKERFILE", dockerfile)
    with pytest.raises(pins.PinError) as missing:
        pins.helm_version()
    assert str(missing.value) == f"{dockerfile}: no line 'ARG HELM_VERSION=<version>'"
    assert pins.airflow_base_image() == "docker.io/apache/airflow:3.3.2-python3.11"


def test_coredns_is_built_served_and_deployed_at_its_one_pin(capsys: pytest.CaptureFixture[str]) -> None:
    """build.sh builds the release pins.py names; the node serves it as the image the manifest runs."""
    assert pins.main(["coredns"]) == 0
    assert capsys.readouterr().out.strip() == pins.COREDNS_VERSION
    deployment = next(d for d in yaml.safe_load_all(coredns_manifest()) if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == COREDNS_IMAGE == f"registry.k8s.io/coredns/coredns:{pins.COREDNS_VERSION}"


def _line_pin(path: Path, pattern: str) -> str:
    found = re.search(pattern, path.read_text(), flags=re.MULTILINE)
    assert found, f"{path}: no line {pattern}"
    return found.group(1)


def test_the_airflow_stand_in_installs_with_the_uv_the_venv_is_made_with() -> None:
    """Two pins of one uv: the Makefile's, and the stand-in image's (which a change would rebuild)."""
    assert _line_pin(REPO / "Makefile", r"^UV_VERSION := (\S+)$") == _line_pin(
        REPO / "localenv" / "images" / "airflow" / "Dockerfile", r"^ARG AIRFLOW_UV_VERSION=(\S+)$"
    )


def test_the_pod_sandbox_is_built_and_served_at_its_one_pin(capsys: pytest.CaptureFixture[str]) -> None:
    """build.sh asks pins.py for pause's release and holds no version of its own; the node serves it."""
    assert pins.main(["pause"]) == 0
    assert capsys.readouterr().out.strip() == pins.PAUSE_VERSION
    assert f"registry.k8s.io/pause:{pins.PAUSE_VERSION}" == PAUSE_IMAGE
    build = (REPO / "localenv" / "build.sh").read_text()
    assert 'PAUSE_VERSION="$(pinned pause)"' in build
    assert pins.PAUSE_VERSION not in build
