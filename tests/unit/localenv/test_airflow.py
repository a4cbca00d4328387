"""localenv/airflow.py: the values of the machine and of a test's overrides, as helm gets them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from localenv.airflow import VALUES, AirflowDeployment, Overrides
from localenv.environment import LocalEnvironment
from localenv.settings import Settings


@pytest.fixture
def deployment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AirflowDeployment:
    monkeypatch.setenv("KAI_LOCALENV_HOME", str(tmp_path / "home"))
    for name in ("POD_SUBNET", "REGISTRY_PORT", "MIRROR_PORT"):
        monkeypatch.delenv(f"KAI_LOCALENV_{name}", raising=False)
    (tmp_path / "home").mkdir()
    return AirflowDeployment(LocalEnvironment(Settings.from_environment()))


def _values(deployment: AirflowDeployment, overrides: Overrides) -> dict[str, Any]:
    path = deployment._write_machine_values("ghcr.io/kai-scale-pipeline/airflow:0123456789ab", overrides)
    return dict(yaml.safe_load(path.read_text()))


def _env(values: dict[str, Any]) -> dict[str, str]:
    return {entry["name"]: entry["value"] for entry in yaml.safe_load(values["extraEnv"])}


def test_the_worker_pods_install_from_mirrors_they_reach_on_the_bridge(deployment: AirflowDeployment) -> None:
    values = _values(deployment, Overrides())
    assert values["images"]["airflow"] == {
        "repository": "ghcr.io/kai-scale-pipeline/airflow",
        "tag": "0123456789ab",
    }
    mirrors = json.loads(_env(values)["KAI_SCALE_SOURCE_MIRRORS"])
    assert {"upstream": "https://github.com/", "mirror": "http://10.244.0.1:28080/github.com/"} in mirrors
    assert {
        "upstream": "oci://ghcr.io/",
        "mirror": "oci://10.244.0.1:25000/ghcr.io/",
        "plain_http": True,
    } in mirrors
    assert not [rule for rule in mirrors if "127.0.0.1" in rule["mirror"] or "file://" in rule["mirror"]]
    assert "volumes" not in values, "values.yaml's own volumes stand"


def test_a_tests_overrides_keep_the_values_files_volumes_and_add_theirs(
    deployment: AirflowDeployment,
) -> None:
    values = _values(
        deployment,
        Overrides(
            env={"KAI_SCALE_SCENARIOS_DIR": "/opt/airflow/test-scenarios"},
            config={"scheduler": {"orphaned_tasks_check_interval": "10"}},
            files={"/opt/airflow/test-scenarios": {"flaky.yaml": "name: flaky\n"}},
        ),
    )
    env = _env(values)
    assert env["KAI_SCALE_SCENARIOS_DIR"] == "/opt/airflow/test-scenarios"
    assert "KAI_SCALE_SOURCE_MIRRORS" in env
    assert values["config"] == {"scheduler": {"orphaned_tasks_check_interval": "10"}}
    base = yaml.safe_load(VALUES.read_text())
    assert values["volumes"][: len(base["volumes"])] == base["volumes"]
    assert values["volumeMounts"][: len(base["volumeMounts"])] == base["volumeMounts"]
    ((name, config_map),) = values["extraConfigMaps"].items()
    assert yaml.safe_load(config_map["data"]) == {"flaky.yaml": "name: flaky\n"}
    assert {"name": name, "configMap": {"name": name}} in values["volumes"]
    assert {"name": name, "mountPath": "/opt/airflow/test-scenarios", "readOnly": True} in values[
        "volumeMounts"
    ]
