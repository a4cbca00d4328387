"""localenv.pins: the scripts read the versions the pipeline pins, where it pins them."""

from __future__ import annotations

import pytest

from kai_scale.cluster.installs import read_installs
from kai_scale.settings import DEFAULT_RUNNER_IMAGE
from localenv import pins
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
