"""What the local Airflow release is given: the machine's values over the overlay, and its Secrets.

Helm gets, in order, deploy/airflow/values.yaml (what a user starts from), values-local.yaml (this
environment's deployment settings) and the values written here of what depends on the machine: the
image as built, the mirrors on the pod bridge, and what a test's ``Overrides`` add, as a deployment's
own values would. The Secrets are what a deployer creates before the install: the database's URL,
the pipeline's connections and the target cluster's kubeconfig.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from localenv import exports, postgres
from localenv.environment import LocalEnvironment
from localenv.paths import REPO

# The values a user starts from, and the local environment's overlay of deployment settings.
VALUES = REPO / "deploy" / "airflow" / "values.yaml"
LOCAL_VALUES = REPO / "deploy" / "airflow" / "values-local.yaml"
# The release's namespace: its Secrets, its services and the worker pods.
NAMESPACE = "airflow"
# Where the worker pods find the target cluster's kubeconfig (values.yaml's volumeMounts).
KUBECONFIG_IN_POD = "/opt/airflow/secrets/target-cluster/kubeconfig"
# The Secret of the pipeline's connections, one key per connection id (deploy/airflow/values.yaml).
CONNECTIONS = "kai-scale-connections"
# Overrides.scenarios: the ConfigMap of scenario files, and where Airflow's pods find them.
SCENARIOS = "kai-scale-scenarios"
SCENARIOS_IN_POD = "/opt/airflow/kai-scale-scenarios"
# The monitoring chart's Prometheus as pods reach it: its Service (installs.yaml's release and namespace).
PROMETHEUS_IN_CLUSTER = ("kube-prometheus-stack-prometheus.monitoring.svc", 9090)
# The setup's Pyroscope (installs.yaml), where KAI's scheduler pushes (the tuning's pyroscope-address).
PYROSCOPE_IN_CLUSTER = ("pyroscope.monitoring.svc", 4040)


@dataclass(frozen=True)
class Overrides:
    """What a test gives the release over the local overlay, as a deployment's own values would."""

    env: Mapping[str, str] = field(default_factory=dict)
    """Settings of every Airflow container and worker pod."""
    config: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """airflow.cfg values by section."""
    scenarios: Mapping[str, str] = field(default_factory=dict)
    """Scenario files (file name to YAML) in place of the image's, as a deployment changes them.

    Without a new image: a ConfigMap mounted into every Airflow pod, named by ``KAI_SCALE_SCENARIOS_DIR``.
    """
    component_env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """One service's own settings, by its key in the chart (``apiServer``, ``dagProcessor``: its ``env``):
    changing them restarts no other pod."""
    connections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Airflow connections by id (the JSON of AIRFLOW_CONN_*) added to the Secret kai-scale-connections
    and given to every Airflow container and worker pod, as a deployment adds its alerts' channels."""


def write_machine_values(environment: LocalEnvironment, image: str, overrides: Overrides) -> Path:
    """The values that depend on this machine (image tag, addresses on the bridge); the overrides."""
    mirrors = exports.source_mirrors(environment, for_pods=True)
    repository, tag = image.rsplit(":", 1)
    # helm replaces lists: the overlay's env (which repeats values.yaml's), each name once, with the
    # machine's and the overrides' values over it.
    local = yaml.safe_load(LOCAL_VALUES.read_text())
    env = {entry["name"]: entry["value"] for entry in local["env"]}
    env |= {"KAI_SCALE_SOURCE_MIRRORS": json.dumps(mirrors), **overrides.env}
    values: dict[str, Any] = {"images": {"airflow": {"repository": repository, "tag": tag}}}
    # Helm replaces lists: what the overrides add to one of values.yaml's goes after its entries.
    shipped = yaml.safe_load(VALUES.read_text())
    if overrides.scenarios:
        env["KAI_SCALE_SCENARIOS_DIR"] = SCENARIOS_IN_POD
        values["volumes"] = [*shipped["volumes"], {"name": SCENARIOS, "configMap": {"name": SCENARIOS}}]
        mount = {"name": SCENARIOS, "mountPath": SCENARIOS_IN_POD, "readOnly": True}
        values["volumeMounts"] = [*shipped["volumeMounts"], mount]
        # Pods restart when the files change: a ConfigMap's update alone reaches them late, one by one.
        values["airflowPodAnnotations"] = {"kai-scale.dev/scenarios": _digest(overrides.scenarios)}
    values["env"] = [{"name": name, "value": value} for name, value in env.items()]
    if overrides.connections:
        # A name the shipped list has would be a second entry for one variable (as with env above).
        listed = {entry["secretKey"] for entry in shipped["secret"] if entry["secretName"] == CONNECTIONS}
        if twice := sorted(overrides.connections.keys() & listed):
            raise ValueError(f"connections the release already has: {', '.join(twice)}")
        added = [
            {
                "envName": f"AIRFLOW_CONN_{conn_id.upper()}",
                "secretName": CONNECTIONS,
                "secretKey": conn_id,
            }
            for conn_id in overrides.connections
        ]
        values["secret"] = [*shipped["secret"], *added]
    if overrides.config:
        values["config"] = {section: dict(options) for section, options in overrides.config.items()}
    for component, component_env in overrides.component_env.items():
        # The chart lists the component's env after the global one: Kubernetes' patch of a
        # Deployment keeps one entry per name, and an upgrade dropped both (seen in a test).
        if twice := sorted(component_env.keys() & env.keys()):
            raise ValueError(f"{component}'s env repeats the release's: {', '.join(twice)}")
        values[component] = {"env": [{"name": name, "value": value} for name, value in component_env.items()]}
    path = environment.config.home / "airflow-values-machine.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return path


def secrets_manifest(environment: LocalEnvironment, overrides: Overrides) -> str:
    """What a deployer creates before the install: the namespace, the Secrets values.yaml names.

    Also the ConfigMap of the overrides' scenario files, when they have some.
    """
    config = environment.config
    gateway = str(config.pod_network.gateway)
    host, port = PROMETHEUS_IN_CLUSTER
    pyroscope_host, pyroscope_port = PYROSCOPE_IN_CLUSTER
    connections = {
        "kubernetes_default": {
            "conn_type": "kubernetes",
            "extra": {"kube_config_path": KUBECONFIG_IN_POD},
        },
        "aws_default": exports.aws_connection(environment),
        "prometheus_default": {"conn_type": "prometheus", "host": host, "port": port, "schema": "http"},
        "pyroscope_default": {
            "conn_type": "pyroscope",
            "host": pyroscope_host,
            "port": pyroscope_port,
            "schema": "http",
        },
        **overrides.connections,
    }
    database = postgres.url(host=gateway, port=config.ports.postgres)
    documents = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        secret("airflow-metadata", {"connection": database}),
        secret(CONNECTIONS, {name: json.dumps(body) for name, body in connections.items()}),
        secret("kai-scale-target-cluster", {"kubeconfig": kubeconfig_for_pods(environment)}),
    ]
    if overrides.scenarios:
        documents.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": SCENARIOS, "namespace": NAMESPACE},
                "data": dict(overrides.scenarios),
            }
        )
    return "\n---\n".join(yaml.safe_dump(document) for document in documents)


def kubeconfig_for_pods(environment: LocalEnvironment) -> str:
    """The admin kubeconfig, certificates inline, with the API server's address on the bridge."""
    flat = yaml.safe_load(environment.kubectl("config", "view", "--raw", "--flatten", "--minify"))
    for cluster in flat["clusters"]:
        cluster["cluster"]["server"] = (
            f"https://{environment.config.pod_network.gateway}:{environment.config.ports.kube_apiserver}"
        )
    return str(yaml.safe_dump(flat))


def _digest(files: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(files), sort_keys=True).encode()).hexdigest()[:16]


def secret(name: str, data: dict[str, str]) -> dict[str, Any]:
    """An Opaque Secret of the release's namespace with ``data`` as its string data."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "type": "Opaque",
        "stringData": data,
    }
