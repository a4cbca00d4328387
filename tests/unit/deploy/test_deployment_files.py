"""docker-compose.yaml and the Dockerfiles, checked as files: Docker cannot run here."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from typing import Any

import pytest
import yaml

from kai_scale.views.app import BROWSER_LIBRARIES
from tests.conftest import ALERT_VARIABLES, REPO

AIRFLOW_SERVICES = {
    "airflow-apiserver": "api-server",
    "airflow-scheduler": "scheduler",
    "airflow-dag-processor": "dag-processor",
    "airflow-triggerer": "triggerer",
    "airflow-worker": "celery worker",
}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yaml").read_text())
    return document


def test_services_in_the_shape_of_airflows_compose(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {*AIRFLOW_SERVICES, "airflow-init", "postgres", "redis"}
    for name, command in AIRFLOW_SERVICES.items():
        service = services[name]
        assert service["command"] == command, name
        assert "healthcheck" in service, name
        assert service["depends_on"]["airflow-init"] == {"condition": "service_completed_successfully"}, name


def test_every_dependency_exists(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, service in services.items():
        assert set(service.get("depends_on") or {}) <= set(services), name


def test_airflow_runs_this_repository(compose: dict[str, Any]) -> None:
    for name in [*AIRFLOW_SERVICES, "airflow-init"]:
        service = compose["services"][name]
        assert service["build"]["dockerfile"] == "docker/airflow/Dockerfile"
        mounts = {volume.split(":")[1] for volume in service["volumes"]}
        assert {"/opt/airflow/dags", "/opt/airflow/plugins", "/opt/airflow/include"} <= mounts, name
        for volume in service["volumes"]:
            source = volume.split(":")[0]
            assert source.startswith("./"), volume
        env = service["environment"]
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@postgres/airflow")
        assert env["AIRFLOW__CELERY__BROKER_URL"].startswith("redis://")
        assert env["KAI_SCALE_INCLUDE_DIR"] == "/opt/airflow/include"
        # Off unless the deployment sets them, the same for every service.
        for setting in (*ALERT_VARIABLES, "KAI_SCALE_SYSTEM_NODE_SELECTOR", "KAI_SCALE_SYSTEM_TOLERATIONS"):
            assert env[setting] == f"${{{setting}:-}}", (name, setting)
        # KAI tuned for scale unless the deployment picks another profile (the local one is for 2 CPUs).
        assert env["KAI_SCALE_KAI_TUNING_PROFILE"] == "${KAI_SCALE_KAI_TUNING_PROFILE:-scale}", name
    for directory in ("dags", "plugins", "include"):
        assert (REPO / directory).is_dir()


def test_dockerfiles_exist_and_the_runner_image_is_the_one_the_local_node_runs() -> None:
    assert (REPO / "docker" / "airflow" / "Dockerfile").exists()
    runner = (REPO / "docker" / "runner" / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["kai-scale-runner"]' in runner
    assert "go test -c" in runner
    # The local environment builds this Dockerfile (into the repository localenv.pins reads).
    assert "docker/runner/Dockerfile" in (REPO / "localenv" / "images.sh").read_text()


def test_the_runner_image_installs_only_the_runner_and_the_model() -> None:
    runner = (REPO / "docker" / "runner" / "Dockerfile").read_text()
    copied = [
        line.split()[1] for line in runner.splitlines() if line.startswith("COPY ") and "--from" not in line
    ]
    assert copied == ["packages/runner/requirements.txt", "packages/model", "packages/runner"]
    assert "pip check" in runner


def test_the_airflow_image_installs_the_provider_over_the_pipeline_lock_and_carries_the_pipeline() -> None:
    airflow = (REPO / "docker" / "airflow" / "Dockerfile").read_text()
    image = airflow.rsplit("\nFROM ", 1)[1]  # the last stage: the chart library's stage comes first
    copied = [
        line.split()[-2] for line in image.splitlines() if line.startswith("COPY ") and "--from" not in line
    ]
    assert copied == ["requirements.txt", "packages/model", "packages/provider", "dags", "plugins", "include"]
    # Where the official image's AIRFLOW_HOME is, as the chart's values find them (no DAG volume).
    assert "COPY --chown=50000:0 dags /opt/airflow/dags" in image


def test_build_leftovers_stay_out_of_the_images() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {"**/build", "**/*.egg-info", "**/__pycache__", ".venv"} <= set(ignored)


def test_the_airflow_image_builds_the_trend_views_browser_libraries_from_the_npm_lock() -> None:
    airflow = (REPO / "docker" / "airflow" / "Dockerfile").read_text()
    ui = REPO / "packages" / "provider" / "ui"
    (vendor,) = {library.parent.relative_to(ui.parent / "src") for library in BROWSER_LIBRARIES}
    assert (
        "COPY packages/provider/ui/package.json packages/provider/ui/package-lock.json"
        " packages/provider/ui/build.mjs ./" in airflow
    )
    assert "RUN npm ci --no-audit --no-fund && npm run build" in airflow
    into_the_provider = (
        f"/kai-scale/packages/provider/src/{vendor} \\\n    /opt/kai-scale/provider/src/{vendor}\n"
    )
    assert f"COPY --chown=50000:0 --from=view-assets {into_the_provider}" in airflow
    assert json.loads((ui / "package.json").read_text())["scripts"]["build"] == "node build.mjs"
    build = (ui / "build.mjs").read_text()
    assert f'const vendor = "../src/{vendor}";' in build
    for library in BROWSER_LIBRARIES:
        assert f'"{library.name}"]' in build, f"build.mjs does not copy {library.name}"


def test_every_file_that_names_airflows_version_names_the_locked_one() -> None:
    """The Airflow the pipeline is locked at (requirements.in), wherever another file names it.

    Each of these is read by a tool of its own (Docker, helm, pip), so none can read the lock's pin: a
    test keeps them equal instead. The compose file's image tag is checked against the values above.
    """
    locked = version("apache-airflow")
    values = yaml.safe_load((REPO / "deploy" / "airflow" / "values.yaml").read_text())
    chart_values = (values["airflowVersion"], values["defaultAirflowTag"], values["images"]["airflow"]["tag"])
    assert chart_values == (locked, locked, locked)
    image = (REPO / "docker" / "airflow" / "Dockerfile").read_text()
    assert re.findall(r"^FROM apache/airflow:(\S+)-python3\.11$", image, flags=re.MULTILINE) == [locked]
    stand_in = REPO / "localenv" / "images" / "airflow"
    assert re.findall(r"AIRFLOW_VERSION=(\S+)", (stand_in / "Dockerfile").read_text()) == [locked]
    requirements = (stand_in / "requirements.in").read_text()
    assert re.findall(r"^apache-airflow\[.*\]==(\S+)$", requirements, flags=re.MULTILINE) == [locked]
