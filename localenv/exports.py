"""What points a shell, the tests, the benchmarks and Airflow at the local environment.

Its variables (``python -m localenv env``): the kubeconfig, S3's endpoint and keys, Airflow's
connections and the pipeline's deployment settings as this environment needs them; and the mirrors of
what the pipeline's setup installs (``KAI_SCALE_SOURCE_MIRRORS``), as this machine and as the Airflow
deployment's worker pods reach them.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from typing import Any

import yaml

from localenv import manifest_mirror, settings
from localenv.charts import CHART_REGISTRIES, PYROSCOPE_CHART
from localenv.environment import LocalEnvironment
from localenv.node_config import SYSTEM_NODE_TAINT
from localenv.paths import REPO

# The deployment's chart values (KAI_SCALE_CHART_VALUES_PROFILE): what is not built here is off.
CHART_VALUES_DIR = REPO / "include" / "manifests" / "chart-values"
CHART_VALUES_PROFILE = "local"


def variables(environment: LocalEnvironment) -> dict[str, str]:
    """The variables that point a shell, the tests and Airflow at this environment."""
    config = environment.config
    kubernetes_connection = {
        "conn_type": "kubernetes",
        "extra": {"kube_config_path": str(config.kubeconfig), "in_cluster": False},
    }
    # The pipeline's Prometheus is the one its setup installs (kube-prometheus-stack).
    prometheus_url = urllib.parse.urlsplit(monitoring_prometheus_url(environment))
    prometheus_connection = {
        "conn_type": "prometheus",
        "host": prometheus_url.hostname,
        "port": prometheus_url.port,
        "schema": "http",
    }
    exported = {
        "KUBECONFIG": str(config.kubeconfig),
        "AWS_ENDPOINT_URL_S3": config.s3_endpoint_url,
        "AWS_ACCESS_KEY_ID": settings.S3_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": settings.S3_SECRET_KEY,
        "AWS_DEFAULT_REGION": settings.S3_REGION,
        "KAI_SCALE_RESULTS_BUCKET": settings.DEFAULT_BUCKET,
        "PROMETHEUS_URL": prometheus_url.geturl(),
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(kubernetes_connection),
        "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(aws_connection(environment)),
        "AIRFLOW_CONN_PROMETHEUS_DEFAULT": json.dumps(prometheus_connection),
        # What docs/reliability.md asks of every deployment (docker-compose sets it too).
        "AIRFLOW__WORKERS__API_RETRIES": "10",
        # KAI at sizes that fit this environment's one 2-CPU node (include/manifests/kai-tuning/).
        "KAI_SCALE_KAI_TUNING_PROFILE": "local",
    }
    # The pipeline's pods go where a cluster's system pods go: onto the tainted system node.
    taint = SYSTEM_NODE_TAINT
    exported["KAI_SCALE_SYSTEM_NODE_SELECTOR"] = f"{taint['key']}={taint['value']}"
    exported["KAI_SCALE_SYSTEM_TOLERATIONS"] = f"{taint['key']}={taint['value']}:{taint['effect']}"
    # The worker has helm, as the Airflow image does.
    exported["PATH"] = f"{config.helm_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    # The charts without what is not built here (Grafana, Alertmanager), Prometheus on a NodePort.
    exported["KAI_SCALE_CHART_VALUES_PROFILE"] = CHART_VALUES_PROFILE
    # This cluster is air-gapped: the setup installs from the local registry and the mirror on disk.
    exported["KAI_SCALE_SOURCE_MIRRORS"] = json.dumps(source_mirrors(environment))
    return exported


def aws_connection(environment: LocalEnvironment) -> dict[str, Any]:
    """The pipeline's AWS connection to this environment's S3 endpoint (the same from pods and here)."""
    return {
        "conn_type": "aws",
        "login": settings.S3_ACCESS_KEY,
        "password": settings.S3_SECRET_KEY,
        "extra": {"endpoint_url": environment.config.s3_endpoint_url, "region_name": settings.S3_REGION},
    }


def monitoring_prometheus_url(environment: LocalEnvironment) -> str:
    """The Prometheus of the monitoring chart the setup installs, on its NodePort at the node's address.

    The port is the one the chart values profile gives it (include/manifests/chart-values/).
    """
    profile = yaml.safe_load((CHART_VALUES_DIR / f"{CHART_VALUES_PROFILE}.yaml").read_text())
    node_port = profile["kube-prometheus-stack"]["prometheus.service.nodePort"]
    return f"http://{environment.config.pod_network.gateway}:{node_port}"


def source_mirrors(environment: LocalEnvironment, *, for_pods: bool = False) -> list[dict[str, Any]]:
    """The mirrors of what the setup installs (``KAI_SCALE_SOURCE_MIRRORS``).

    The release manifests from the disk, the charts' OCI registries from the local registry, where
    charts.py pushes them, and Pyroscope's chart repository from the mirror component (helm reads
    a repository over HTTP only). ``for_pods``: as the Airflow deployment's worker pods reach them,
    on the pod bridge: the manifests over HTTP too.
    """
    config = environment.config
    served_at = f"http://{config.pod_network.gateway}:{config.ports.mirror}/"
    mirrors: list[dict[str, Any]] = [
        {"upstream": PYROSCOPE_CHART.repository, "mirror": served_at + PYROSCOPE_CHART.mirror_path}
    ]
    if for_pods:
        mirrors.append(manifest_mirror.http_mirror_rule(served_at))
        registry = f"{config.pod_network.gateway}:{config.ports.registry}"
    else:
        mirrors.append(manifest_mirror.mirror_rule(config.mirror_dir))
        registry = environment.registry().address
    mirrors += [
        {"upstream": f"oci://{name}/", "mirror": f"oci://{registry}/{name}/", "plain_http": True}
        for name in CHART_REGISTRIES
    ]
    return mirrors
