"""The monitoring stack as the pipeline's setup installs it: kube-prometheus-stack and Pyroscope.

Its images are built from their Go modules (localenv/images.sh); the local chart values profile turns
off what is not built here (include/manifests/chart-values/local.yaml).
"""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes import client

from kai_scale.metrics.prometheus_api import PrometheusClient
from localenv import pins
from localenv.node_config import NODE_NAME
from tests.waiting import wait_for

BUILT_IMAGES = {
    "quay.io/prometheus-operator/prometheus-operator:v0.76.1",
    "quay.io/prometheus-operator/prometheus-config-reloader:v0.76.1",
    "quay.io/prometheus/prometheus:v2.54.1",
    "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.13.0",
    f"grafana/pyroscope:{pins.pyroscope_version()}",
}


def test_the_stack_runs_on_the_system_node_from_the_built_images(
    prometheus: PrometheusClient, core: client.CoreV1Api
) -> None:
    pods = core.list_namespaced_pod("monitoring").items
    assert {pod.spec.node_name for pod in pods} == {NODE_NAME}, "placed on the system node"
    images = {container.image for pod in pods for container in pod.spec.containers}
    assert images == BUILT_IMAGES, "and nothing the local values profile turns off"
    assert all(pod.status.phase == "Running" for pod in pods), [
        (p.metadata.name, p.status.phase) for p in pods
    ]


def test_its_prometheus_scrapes_the_api_server_the_kubelet_and_kube_state_metrics(
    prometheus: PrometheusClient,
) -> None:
    """What the metrics profile reads: the API server's requests and the containers' CPU and memory."""

    def jobs() -> set[str] | None:
        up = prometheus.query("up == 1", at=datetime.now(UTC))
        found = {series.labels.get("job", "") for series in up}
        return found if {"apiserver", "kubelet", "kube-state-metrics"} <= found else None

    wait_for(
        jobs, timeout=120, what="the API server, kubelet and kube-state-metrics up in Prometheus", interval=5
    )
    memory = prometheus.query(
        'sum by (container) (container_memory_working_set_bytes{namespace="kube-system", container!=""})',
        at=datetime.now(UTC),
    )
    assert "coredns" in {series.labels["container"] for series in memory}, "cAdvisor's, through the kubelet"
