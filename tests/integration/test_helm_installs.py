"""The setup's helm path: a real helm (built from Go modules) against the local API server.

The fake GPU operator's chart is the real one, from the local registry as the deployment's mirror,
with its images built from its source. The monitoring charts are not served yet (issue 11), so small
local charts of their own stand in for them, to test helm's release handling: install once, upgrade on
a changed value, the connection's context. helm, the API server, the Airflow connection and the setup
code are the real ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from kai_scale.cluster.chart_values import Profile
from kai_scale.cluster.installs import (
    DeploymentInstalls,
    install_fake_gpu_operator,
    install_monitoring,
    read_installs,
)
from kai_scale.cluster.node_pool import NODEPOOL_NAME, wait_for_nodes
from kai_scale.cluster.placement import Placement
from kai_scale.cluster.sources import Sources
from kai_scale.cluster.tasks import setup_step
from kai_scale.cluster.teardown import teardown
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.hooks.helm import HelmHook, run
from kai_scale.settings import PipelineSettings
from kai_scale_model.installs import ChartInstall
from localenv.environment import LocalEnvironment
from localenv.node_config import NODE_NAME
from tests.conftest import REPO
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("airflow_on_local_env")

FAKE_GPU_OPERATOR_TEMPLATES = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: topology
data:
  gpuCount: "{{ .Values.topology.nodePools.default.gpuCount }}"
{{- range list "device-plugin" "nvidia-dcgm-exporter" "status-updater" }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ . }}
spec:
  replicas: 0
  selector: {matchLabels: {app: {{ . }}}}
  template:
    metadata: {labels: {app: {{ . }}}}
    spec: {containers: [{name: main, image: pause}]}
{{- end }}
"""
CONFIG_MAP_TEMPLATE = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Chart.Name }}
data: {}
"""


def _write_chart(root: Path, *, name: str, version: str, templates: str, values: dict[str, Any]) -> Path:
    chart = root / name
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": name, "version": version}))
    (chart / "values.yaml").write_text(yaml.safe_dump(values))
    (chart / "templates" / "objects.yaml").write_text(templates)
    return chart


@pytest.fixture
def helm_worker(local_env: LocalEnvironment, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A worker with helm on its PATH and a default kubeconfig that leads nowhere.

    helm must then reach the cluster through the Airflow connection's kubeconfig, or fail.
    """
    helm_dir = local_env.config.helm_dir
    assert (helm_dir / "helm").exists(), f"helm is built by localenv/build.sh into {helm_dir}"
    monkeypatch.setenv("PATH", f"{helm_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    for variable in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        monkeypatch.setenv(variable, str(tmp_path / variable.lower()))


def _helm(*args: str) -> str:
    """Run helm on the cluster of the pipeline's Kubernetes connection."""
    with HelmHook(conn_id="kubernetes_default").cli_kubeconfig() as kubeconfig:
        assert kubeconfig is not None, "the local environment's connection names its kubeconfig"
        return run(["helm", *args, "--kubeconfig", kubeconfig])


def _releases(namespace: str) -> dict[str, dict[str, Any]]:
    return {release["name"]: release for release in json.loads(_helm("list", "-n", namespace, "-o", "json"))}


@pytest.fixture
def release_namespace(core: client.CoreV1Api) -> Iterator[str]:
    """The namespace the test's releases go to (created by helm), removed with them afterwards."""
    name = f"helm-test-{uuid.uuid4().hex[:8]}"
    yield name
    for release in _releases(name):
        _helm("uninstall", release, "-n", name)
    with contextlib.suppress(client.ApiException):  # absent when the test failed before helm ran
        core.delete_namespace(name, grace_period_seconds=0)


def test_the_real_fake_gpu_operator_gives_the_kwok_nodes_their_gpus(
    local_env: LocalEnvironment, core: client.CoreV1Api, cluster: ClusterHook
) -> None:
    """The shipped installs.yaml's chart, from the local registry as the deployment's mirror.

    The chart 0.0.73 packaged from its source and its images built from it (localenv); helm on the
    worker's PATH, the mirror and the system nodes' placement are the local deployment's settings.
    """
    settings = PipelineSettings.from_environment(default_include_dir=REPO / "include")
    namespace = read_installs(settings.include_dir).charts["fake-gpu-operator"].namespace
    # A cluster without it and without KWOK nodes, as on a first night (an earlier test or run may
    # have installed it, and left nodes).
    if "fake-gpu-operator" in _releases(namespace):
        _helm("uninstall", "fake-gpu-operator", "-n", namespace, "--wait")
    setup_step("size_node_pool").run(settings=settings, params={"node_count": 0})
    selector = f"kwok.x-k8s.io/controller={NODEPOOL_NAME}"
    wait_for(lambda: not core.list_node(label_selector=selector).items, timeout=60, what="no KWOK nodes")

    lines = setup_step("install_fake_gpu_operator").run(settings=settings).lines

    assert lines == [
        "fake-gpu-operator 0.0.73 installed from "
        f"oci://{local_env.registry().address}/ghcr.io/run-ai/fake-gpu-operator/fake-gpu-operator",
        "deployment nvidia-dcgm-exporter: deleted",
        "deployment device-plugin: absent",
    ]
    pods = core.list_namespaced_pod(namespace).items
    assert {pod.spec.node_name for pod in pods} == {NODE_NAME}, "placed on the system node"
    images = {container.image for pod in pods for container in pod.spec.containers}
    assert "ghcr.io/run-ai/fake-gpu-operator/status-updater:0.0.73" in images
    assert "ghcr.io/run-ai/fake-gpu-operator/kwok-gpu-device-plugin:0.0.73" in images
    assert all(pod.status.phase == "Running" for pod in pods), [
        (p.metadata.name, p.status.phase) for p in pods
    ]

    setup_step("size_node_pool").run(settings=settings, params={"node_count": 2})
    try:
        assert wait_for_nodes(cluster, node_count=2, timeout=120) == ["2 nodes Ready with nvidia.com/gpu"]
        nodes = core.list_node(label_selector=f"kwok.x-k8s.io/controller={NODEPOOL_NAME}").items
        assert [node.status.capacity["nvidia.com/gpu"] for node in nodes] == ["8", "8"], (
            "the operator's topology"
        )
    finally:
        # As the night ends: the pool its setup created goes (kwok-operator deletes its nodes).
        teardown(cluster, run_id="fake-gpu-operator-test", existing=None)
    assert (
        setup_step("install_fake_gpu_operator")
        .run(settings=settings)
        .lines[0]
        .startswith("fake-gpu-operator 0.0.73 up to date")
    )


def _monitoring_charts(root: Path, namespace: str) -> dict[str, ChartInstall]:
    """Small local charts in place of kube-prometheus-stack and Pyroscope, at their pinned versions."""
    return {
        release: ChartInstall(
            chart=str(
                _write_chart(root, name=release, version=version, templates=CONFIG_MAP_TEMPLATE, values={})
            ),
            version=version,
            namespace=namespace,
        )
        for release, version in (("kube-prometheus-stack", "62.7.0"), ("pyroscope", "2.1.2"))
    }


def _installs(
    charts: dict[str, ChartInstall], *, profile: str = "default", turned_off: frozenset[str] = frozenset()
) -> DeploymentInstalls:
    """The shipped installs.yaml with ``charts``, under a values profile that turns ``turned_off`` off."""
    return DeploymentInstalls(
        pins=read_installs(REPO / "include").model_copy(update={"charts": charts}),
        chart_values=Profile(name=profile, values={}, turned_off=turned_off),
    )


@pytest.mark.usefixtures("helm_worker")
def test_monitoring_charts_are_installed_once_then_left_as_they_are(
    tmp_path: Path, release_namespace: str
) -> None:
    charts = _monitoring_charts(tmp_path, release_namespace)

    first = install_monitoring(
        helm=HelmHook(conn_id="kubernetes_default"),
        installs=_installs(charts),
        sources=Sources(),
        placement=Placement(),
    )
    second = install_monitoring(
        helm=HelmHook(conn_id="kubernetes_default"),
        installs=_installs(charts),
        sources=Sources(),
        placement=Placement(),
    )

    assert first == ["kube-prometheus-stack 62.7.0 installed", "pyroscope 2.1.2 installed"]
    assert second == ["kube-prometheus-stack 62.7.0 up to date", "pyroscope 2.1.2 up to date"]
    releases = _releases(release_namespace)
    assert {name: (r["chart"], r["revision"]) for name, r in releases.items()} == {
        "kube-prometheus-stack": ("kube-prometheus-stack-62.7.0", "1"),
        "pyroscope": ("pyroscope-2.1.2", "1"),
    }, "the re-run setup did not upgrade the releases"


@pytest.mark.usefixtures("helm_worker")
def test_a_release_the_values_profile_turns_off_is_not_installed(
    tmp_path: Path, release_namespace: str
) -> None:
    """As a values profile turns a release off (here Pyroscope): the setup says so and installs the rest."""
    charts = _monitoring_charts(tmp_path, release_namespace)

    lines = install_monitoring(
        helm=HelmHook(conn_id="kubernetes_default"),
        installs=_installs(charts, profile="local", turned_off=frozenset({"pyroscope"})),
        sources=Sources(),
        placement=Placement(),
    )

    assert lines == [
        "pyroscope: turned off by the chart values profile 'local' (KAI_SCALE_CHART_VALUES_PROFILE), "
        "not installed",
        "kube-prometheus-stack 62.7.0 installed",
    ]
    assert set(_releases(release_namespace)) == {"kube-prometheus-stack"}


def test_an_inline_kubeconfig_is_a_private_file_for_the_command_only(
    local_env: LocalEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = local_env.config.kubeconfig.read_text()
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUBE_INLINE",
        json.dumps({"conn_type": "kubernetes", "extra": {"kube_config": text, "in_cluster": False}}),
    )
    with HelmHook(conn_id="kube_inline").cli_kubeconfig() as kubeconfig:
        assert kubeconfig is not None
        path = Path(kubeconfig)
        assert path.read_text() == text
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not path.exists()


@pytest.mark.usefixtures("helm_worker")
def test_a_changed_set_value_upgrades_a_release_at_its_pinned_version(
    tmp_path: Path, release_namespace: str, api_client: client.ApiClient, cluster: ClusterHook
) -> None:
    chart = _write_chart(
        tmp_path,
        name="fake-gpu-operator",
        version="0.0.73",
        templates=FAKE_GPU_OPERATOR_TEMPLATES,
        values={"topology": {"nodePools": {"default": {"gpuCount": 2}}}},
    )
    spec = {
        "chart": str(chart),
        "version": "0.0.73",
        "namespace": release_namespace,
        "delete_deployments": [],
    }
    for gpus in ("8", "4"):
        fake_gpu_operator = ChartInstall.model_validate(
            {**spec, "set": {"topology.nodePools.default.gpuCount": gpus}}
        )
        lines = install_fake_gpu_operator(
            cluster,
            helm=HelmHook(conn_id="kubernetes_default"),
            installs=_installs({"fake-gpu-operator": fake_gpu_operator}).pins,
            sources=Sources(),
            placement=Placement(),
        )
        assert lines == [f"fake-gpu-operator 0.0.73 installed from {chart}"], f"gpuCount={gpus} is applied"
    topology = client.CoreV1Api(api_client).read_namespaced_config_map("topology", release_namespace)
    assert topology.data == {"gpuCount": "4"}
    assert _releases(release_namespace)["fake-gpu-operator"]["revision"] == "2"


@pytest.mark.usefixtures("helm_worker")
def test_helm_uses_the_connections_cluster_context(
    tmp_path: Path, release_namespace: str, local_env: LocalEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kubeconfig's current context leads nowhere; the connection's ``cluster_context`` is the cluster."""
    kubeconfig = yaml.safe_load(local_env.config.kubeconfig.read_text())
    real = kubeconfig["contexts"][0]
    kubeconfig["clusters"].append({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:9"}})
    kubeconfig["contexts"] = [
        {"name": "the-cluster", "context": real["context"]},
        {"name": "nowhere", "context": {**real["context"], "cluster": "nowhere"}},
    ]
    kubeconfig["current-context"] = "nowhere"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    extra = {"kube_config_path": str(path), "cluster_context": "the-cluster", "in_cluster": False}
    monkeypatch.setenv("AIRFLOW_CONN_KUBE_CONTEXT", json.dumps({"conn_type": "kubernetes", "extra": extra}))
    charts = _monitoring_charts(tmp_path, release_namespace)

    lines = install_monitoring(
        helm=HelmHook(conn_id="kube_context"),
        installs=_installs(charts),
        sources=Sources(),
        placement=Placement(),
    )

    assert lines == ["kube-prometheus-stack 62.7.0 installed", "pyroscope 2.1.2 installed"]
    assert set(_releases(release_namespace)) == {"kube-prometheus-stack", "pyroscope"}
