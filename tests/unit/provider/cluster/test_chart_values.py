"""Chart values profiles: a deployment's --set values over installs.yaml's, checked before helm runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_scale.cluster.chart_values import ChartValuesError, Profile, load_profile
from kai_scale.cluster.installs import OPTIONAL_RELEASES, load_installs, read_installs
from tests.conftest import REPO

RELEASES = {"fake-gpu-operator", "kube-prometheus-stack", "pyroscope"}
OPTIONAL = OPTIONAL_RELEASES


def test_the_default_profile_leaves_installs_yaml_as_it_is() -> None:
    assert load_profile(REPO / "include", "default", releases=RELEASES) == Profile(
        name="default", values={}, turned_off=frozenset()
    )
    installs = load_installs(REPO / "include")
    assert installs.pins.charts["kube-prometheus-stack"].values["grafana.enabled"] == "true"
    assert installs.pins == read_installs(REPO / "include")
    assert installs.chart_values.turned_off == frozenset()


def test_the_local_profile_turns_nothing_off() -> None:
    """Pyroscope is built here from its source snapshot, so the local setup installs it too."""
    installs = load_installs(REPO / "include", chart_values_profile="local")
    assert installs.chart_values.name == "local"
    assert installs.chart_values.turned_off == frozenset()


def test_the_local_profile_is_set_over_the_chart_values_of_installs_yaml() -> None:
    charts = load_installs(REPO / "include", chart_values_profile="local").pins.charts
    values = charts["kube-prometheus-stack"].values
    assert values["grafana.enabled"] == "false", "the profile wins"
    assert values["prometheus.enabled"] == "true", "installs.yaml's other values stay"
    assert values["prometheus.service.nodePort"] == "30090"
    fake_gpu_operator = charts["fake-gpu-operator"].values
    assert fake_gpu_operator["topology.nodePools.default.gpuCount"] == "8", "from installs.yaml"
    assert fake_gpu_operator["statusUpdater.resources.requests.cpu"] == "50m", "from the profile"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("grafana: {enabled: false}\n", r"'grafana' is no release of installs.yaml"),
        (
            "kube-prometheus-stack: {grafana: {enabled: false}}\n",
            r"kube-prometheus-stack.grafana must be a single value",
        ),
        ("kube-prometheus-stack: {}\n", r"kube-prometheus-stack must map --set keys to values, or be false"),
        ("pyroscope: true\n", r"pyroscope must map --set keys to values, or be false to turn it off"),
        (
            "fake-gpu-operator: false\n",
            r"fake-gpu-operator cannot be turned off: the setup needs it \(only pyroscope can be\)",
        ),
        (
            "kube-prometheus-stack: false\n",
            r"kube-prometheus-stack cannot be turned off: the setup needs it \(only pyroscope can be\)",
        ),
        ("- kube-prometheus-stack\n", r"must map release names to their values, got list"),
        ("false\n", r"must map release names to their values, got bool"),
        ("kube-prometheus-stack: {prometheus.args: 'a,b'}\n", r"has one of , \[ \]"),
        ("kube-prometheus-stack: {'prometheus.hosts[0]': a}\n", r"has one of , \[ \]"),
        ("kube-prometheus-stack: [\n", r"is not YAML"),
    ],
)
def test_a_malformed_profile_names_its_file_and_what_is_wrong(
    tmp_path: Path, text: str, message: str
) -> None:
    profiles = tmp_path / "manifests" / "chart-values"
    profiles.mkdir(parents=True)
    (profiles / "broken.yaml").write_text(text)
    with pytest.raises(ChartValuesError, match=message) as raised:
        load_profile(tmp_path, "broken", releases=RELEASES, optional=OPTIONAL)
    assert str(profiles / "broken.yaml") in str(raised.value)


def test_an_unknown_profile_lists_the_ones_there() -> None:
    with pytest.raises(
        ChartValuesError, match=r"no chart values profile 'big' in .*\(available: default, local\)"
    ):
        load_profile(REPO / "include", "big", releases=RELEASES)
