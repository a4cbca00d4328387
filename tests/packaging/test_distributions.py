"""The distributions as they are installed: the runner alone from its lock, the provider in Airflow."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

UV = Path(sys.executable).parent / "uv"
RUNNER_LOCK = REPO / "packages" / "runner" / "requirements.txt"
# Every module of the two distributions the runner image installs, found by walking them, so a new
# module (or one imported lazily) is checked too.
IMPORT_ALL = """
import importlib, json, pkgutil, sys
import kai_scale_model, kai_scale_runner
for package in (kai_scale_model, kai_scale_runner):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(module.name)
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


@pytest.fixture(scope="module")
def runner_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with what the runner image installs: its lock, the model and the runner."""
    venv = tmp_path_factory.mktemp("runner") / "venv"
    python = str(venv / "bin" / "python")
    subprocess.run([str(UV), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    subprocess.run(
        [
            str(UV),
            "pip",
            "sync",
            "--quiet",
            "--python",
            python,
            str(REPO / "packages/runner/requirements.txt"),
        ],
        check=True,
    )
    subprocess.run(
        [str(UV), "pip", "install", "--quiet", "--python", python, "--no-deps"]
        + [str(REPO / "packages" / name) for name in ("model", "runner")],
        check=True,
    )
    return venv


def test_the_runner_lock_satisfies_the_runner_and_holds_no_airflow_or_boto3(runner_venv: Path) -> None:
    python = str(runner_venv / "bin" / "python")
    check = subprocess.run(
        [str(UV), "pip", "check", "--python", python], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    installed = subprocess.run(
        [str(UV), "pip", "list", "--python", python, "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    names = {package["name"].lower() for package in json.loads(installed.stdout)}
    assert {"kai-scale-runner", "kai-scale-model", "kubernetes"} <= names
    assert not names & {"apache-airflow", "apache-airflow-core", "boto3", "botocore"}


def test_every_runner_module_imports_without_airflow_or_boto3(runner_venv: Path) -> None:
    result = subprocess.run(
        [str(runner_venv / "bin" / "python"), "-c", IMPORT_ALL], capture_output=True, text=True, check=True
    )
    top_level = set(json.loads(result.stdout))
    assert "kai_scale_runner" in top_level
    assert not top_level & {"airflow", "boto3", "botocore", "kai_scale"}


def test_the_runner_command_is_installed(runner_venv: Path) -> None:
    command = runner_venv / "bin" / "kai-scale-runner"
    assert shutil.which(str(command))
    result = subprocess.run([str(command), "--help"], capture_output=True, text=True, check=True)
    assert "run the scenario given in KAI_SCALE_SCENARIO" in result.stdout


def test_airflow_finds_the_provider_and_its_prometheus_connection_type() -> None:
    from airflow.providers_manager import ProvidersManager  # noqa: PLC0415 - after conftest's settings
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime  # noqa: PLC0415

    manager = ProvidersManager()  # type: ignore[no-untyped-call]
    assert "kai-scale-airflow-provider" in manager.providers
    runtime = ProvidersManagerTaskRuntime()  # type: ignore[no-untyped-call]
    hook = runtime.hooks["prometheus"]
    assert hook is not None
    assert hook.hook_class_name == "kai_scale.hooks.prometheus.PrometheusHook"
    behaviour = manager.field_behaviours["prometheus"]
    assert behaviour["relabeling"]["password"] == "Bearer token"
    assert "login" in behaviour["hidden_fields"]


def test_airflow_lists_the_providers_notifiers() -> None:
    from airflow.providers_manager import ProvidersManager  # noqa: PLC0415 - after conftest's settings

    manager = ProvidersManager()  # type: ignore[no-untyped-call]
    # Airflow 3.3 lists the class names (its annotation says NotificationInfo), each found importable.
    names = {str(entry) for entry in manager.notification}
    ours = {name for name in names if name.startswith("kai_scale.")}
    assert "airflow.providers.smtp.notifications.smtp.SmtpNotifier" in names
    assert ours == {
        "kai_scale.notifications.run_alerts.RunAlertEmailNotifier",
        "kai_scale.notifications.run_alerts.RunAlertWebhookNotifier",
    }
