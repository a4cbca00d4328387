from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from localenv import exports
from localenv.environment import LocalEnvironment
from localenv.settings import Ports, Settings
from tests.conftest import REPO


def test_ports_are_overridable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAI_LOCALENV_S3_PORT", "41000")
    assert Ports.from_environment().s3 == 41000


def test_the_default_ports_are_outside_the_ephemeral_and_node_port_ranges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inside this machine's ephemeral range, a client connection may hold a server's port."""
    for field in dataclasses.fields(Ports):
        monkeypatch.delenv(f"KAI_LOCALENV_{field.name.upper()}_PORT", raising=False)
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    node_ports = range(30000, 32768)
    for component, port in Ports.from_environment().by_component().items():
        assert not low <= port <= high, f"{component} {port} is in the ephemeral range {low}-{high}"
        assert port not in node_ports, f"{component} {port} is in the NodePort range"


@pytest.mark.parametrize("value", ["abc", "0", "70000", "-1"])
def test_bad_port_names_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("KAI_LOCALENV_REGISTRY_PORT", value)
    with pytest.raises(ValueError, match=r"KAI_LOCALENV_REGISTRY_PORT must be a TCP port number"):
        Ports.from_environment()


def test_state_lives_under_the_home(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("KAI_LOCALENV_HOME", "/tmp/kai-home")
    config = Settings.from_environment()
    assert str(config.kubeconfig) == "/tmp/kai-home/kubeconfig"


def test_the_s3_endpoint_is_where_the_runner_pods_reach_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAI_LOCALENV_POD_SUBNET", "10.99.0.0/24")
    config = Settings.from_environment()
    assert config.s3_endpoint_url == f"http://10.99.0.1:{config.ports.s3}", "the bridge's address"


def test_the_pod_network_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAI_LOCALENV_POD_SUBNET", raising=False)
    assert str(Settings.from_environment().pod_subnet) == "10.244.0.0/24"
    monkeypatch.setenv("KAI_LOCALENV_POD_SUBNET", "10.99.0.0/24")
    assert str(Settings.from_environment().pod_subnet) == "10.99.0.0/24"


def test_kai_is_installed_unless_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAI_LOCALENV_KAI", raising=False)
    assert Settings.from_environment().kai
    monkeypatch.setenv("KAI_LOCALENV_KAI", "0")
    assert not Settings.from_environment().kai


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("KAI_LOCALENV_KAI", "on", "must be 1 .* or 0"),
        ("KAI_LOCALENV_POD_SUBNET", "10.244.0.1/24", "must be an IPv4 subnet"),
        ("KAI_LOCALENV_POD_SUBNET", "fd00::/64", "must be an IPv4 subnet"),
    ],
)
def test_bad_node_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=f"{name} {message}"):
        Settings.from_environment()


def test_the_local_deployment_tunes_kai_to_its_size() -> None:
    """Its one node has 2 CPUs: the scale profile's scheduler alone requests 3."""
    exported = exports.variables(LocalEnvironment(Settings.from_environment()))
    assert exported["KAI_SCALE_KAI_TUNING_PROFILE"] == "local"
    assert (REPO / "include" / "manifests" / "kai-tuning" / "local.yaml").is_file()


def test_the_pipeline_installs_the_monitoring_stack_and_reads_its_prometheus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KAI_LOCALENV_POD_SUBNET", raising=False)
    exported = exports.variables(LocalEnvironment(Settings.from_environment()))
    assert "KAI_SCALE_SKIP_INSTALLS" not in exported, "the setup installs the whole monitoring stack"
    assert exported["KAI_SCALE_CHART_VALUES_PROFILE"] == "local"
    # The NodePort of the local values profile, on the node's address (the pod bridge's).
    assert exported["PROMETHEUS_URL"] == "http://10.244.0.1:30090"
    connection = json.loads(exported["AIRFLOW_CONN_PROMETHEUS_DEFAULT"])
    assert (connection["host"], connection["port"]) == ("10.244.0.1", 30090)
