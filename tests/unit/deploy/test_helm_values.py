"""deploy/airflow's values files: rendered by the official chart as shipped, consistent with compose.

helm template runs the chart's own templates (no cluster): the chart is packaged from
../shared/vendor as the local registry serves it, with helm from `make local-deps`.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml

from localenv.airflow_values import LOCAL_VALUES, VALUES
from localenv.charts import AIRFLOW_CHART, ChartPusher, vendor_dir
from localenv.node_config import SYSTEM_NODE_LABEL
from localenv.settings import Settings
from tests.conftest import REPO

AIRFLOW_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")


def _env(values: dict[str, Any]) -> dict[str, str]:
    return {entry["name"]: entry["value"] for entry in values["env"]}


@pytest.fixture(scope="module")
def base() -> dict[str, Any]:
    return dict(yaml.safe_load(VALUES.read_text()))


@pytest.fixture(scope="module")
def local() -> dict[str, Any]:
    return dict(yaml.safe_load(LOCAL_VALUES.read_text()))


def test_the_local_overlay_keeps_every_setting_of_the_values_a_user_starts_from(
    base: dict[str, Any], local: dict[str, Any]
) -> None:
    """Helm replaces a list: the overlay's env must repeat the base's, or the base's are lost."""
    base_env, local_env = _env(base), _env(local)
    assert {name: local_env.get(name) for name in base_env} == base_env
    assert set(local_env) - set(base_env) == {
        "KAI_SCALE_SCHEDULE",
        "KAI_SCALE_KAI_TUNING_PROFILE",
        "KAI_SCALE_CHART_VALUES_PROFILE",
        "KAI_SCALE_SYSTEM_NODE_SELECTOR",
        "KAI_SCALE_SYSTEM_TOLERATIONS",
    }


def test_docker_compose_runs_the_same_image_and_settings(base: dict[str, Any]) -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yaml").read_text())
    environment = compose["x-airflow-common"]["environment"]
    assert compose["x-airflow-common"]["build"]["dockerfile"] == "docker/airflow/Dockerfile"
    settings = _env(base)
    assert environment["AIRFLOW__WORKERS__API_RETRIES"] == settings["AIRFLOW__WORKERS__API_RETRIES"]
    bucket = settings["KAI_SCALE_RESULTS_BUCKET"]
    assert environment["KAI_SCALE_RESULTS_BUCKET"] == f"${{KAI_SCALE_RESULTS_BUCKET:-{bucket}}}"
    assert base["config"]["logging"]["remote_base_log_folder"].startswith(f"s3://{bucket}/")
    assert environment["AIRFLOW__LOGGING__REMOTE_LOGGING"] == base["config"]["logging"]["remote_logging"]
    assert (
        environment["AIRFLOW__LOGGING__REMOTE_LOG_CONN_ID"] == base["config"]["logging"]["remote_log_conn_id"]
    )
    # The image's own Airflow version, in the chart's values and the compose file's image name.
    assert compose["x-airflow-common"]["image"].endswith(f":{base['airflowVersion']}")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The chart's manifests for values.yaml and the local overlay."""
    work = tmp_path_factory.mktemp("airflow-chart")
    helm = Settings.from_environment().helm_dir / "helm"
    chart = ChartPusher(
        helm=helm, registry="unused", vendor=vendor_dir(), mirror=work, log_path=work / "helm.log"
    ).package(AIRFLOW_CHART, work)
    result = subprocess.run(
        [str(helm), "template", "airflow", str(chart), "--namespace=airflow"]
        + [f"--values={path}" for path in (VALUES, LOCAL_VALUES)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [document for document in yaml.safe_load_all(result.stdout) if document]


def _pod_specs(rendered: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        document["metadata"]["name"]: document["spec"]["template"]["spec"]
        for document in rendered
        if document["kind"] in {"Deployment", "StatefulSet", "Job"}
    }


def test_the_chart_renders_airflow_on_the_system_node_with_no_database_of_its_own(
    rendered: list[dict[str, Any]],
) -> None:
    specs = _pod_specs(rendered)
    for component in (*AIRFLOW_COMPONENTS, "statsd"):
        spec = specs[f"airflow-{component}"]
        assert spec["nodeSelector"] == {SYSTEM_NODE_LABEL: "system"}, component
    assert not [name for name in specs if "postgresql" in name], "the database is outside the chart"
    assert not [document for document in rendered if document["kind"] == "PersistentVolumeClaim"]
    (config,) = [
        d for d in rendered if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "airflow-config"
    ]
    airflow_cfg = config["data"]["airflow.cfg"]
    assert "executor = KubernetesExecutor" in airflow_cfg
    assert "remote_logging = True" in airflow_cfg
    # The worker pods' template: the same image, the system node, the pipeline's connections.
    template = yaml.safe_load(config["data"]["pod_template_file.yaml"])
    assert template["spec"]["nodeSelector"] == {SYSTEM_NODE_LABEL: "system"}
    env = {entry["name"]: entry for entry in template["spec"]["containers"][0]["env"]}
    assert {"AIRFLOW_CONN_KUBERNETES_DEFAULT", "AIRFLOW_CONN_AWS_DEFAULT", "KAI_SCALE_RESULTS_BUCKET"} <= set(
        env
    )
    # Pyroscope's connection may be missing from the Secret: every pod starts without it.
    pyroscope = {"name": "kai-scale-connections", "key": "pyroscope_default", "optional": True}
    assert env["AIRFLOW_CONN_PYROSCOPE_DEFAULT"]["valueFrom"]["secretKeyRef"] == pyroscope
    for name, spec in _pod_specs(rendered).items():
        for container in spec["containers"]:
            for entry in container.get("env", []):
                if entry["name"] == "AIRFLOW_CONN_PYROSCOPE_DEFAULT":
                    assert entry["valueFrom"]["secretKeyRef"] == pyroscope, (name, container["name"])


def test_the_image_is_the_pipelines_for_every_airflow_container(rendered: list[dict[str, Any]]) -> None:
    for name, spec in _pod_specs(rendered).items():
        if name == "airflow-statsd":
            continue
        for container in (*spec.get("initContainers", []), *spec["containers"]):
            assert container["image"].startswith("ghcr.io/kai-scale-pipeline/airflow:"), (
                name,
                container["name"],
            )
