"""localenv/airflow_values.py: the machine's values and a test's overrides for helm; a failed deploy."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from localenv.airflow import AirflowDeployment, container_that_cannot_start
from localenv.airflow_values import (
    CONNECTIONS,
    LOCAL_VALUES,
    SCENARIOS,
    SCENARIOS_IN_POD,
    VALUES,
    Overrides,
    write_machine_values,
)
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
    path = write_machine_values(
        deployment.environment, "ghcr.io/kai-scale-pipeline/airflow:0123456789ab", overrides
    )
    return dict(yaml.safe_load(path.read_text()))


def _env(values: dict[str, Any]) -> dict[str, str]:
    names = [entry["name"] for entry in values["env"]]
    assert len(names) == len(set(names)), "a name twice breaks helm's upgrade of the pods"
    return {entry["name"]: entry["value"] for entry in values["env"]}


def test_the_worker_pods_install_from_mirrors_they_reach_on_the_bridge(deployment: AirflowDeployment) -> None:
    values = _values(deployment, Overrides())
    image = {"repository": "ghcr.io/kai-scale-pipeline/airflow", "tag": "0123456789ab"}
    assert values["images"]["airflow"] == image
    mirrors = json.loads(_env(values)["KAI_SCALE_SOURCE_MIRRORS"])
    assert {"upstream": "https://github.com/", "mirror": "http://10.244.0.1:28080/github.com/"} in mirrors
    charts = {"upstream": "oci://ghcr.io/", "mirror": "oci://10.244.0.1:25000/ghcr.io/", "plain_http": True}
    assert charts in mirrors
    assert not [rule for rule in mirrors if "127.0.0.1" in rule["mirror"] or "file://" in rule["mirror"]]


def test_the_env_keeps_every_setting_of_both_values_files_and_overrides_replace_theirs(
    deployment: AirflowDeployment,
) -> None:
    local = {entry["name"]: entry["value"] for entry in yaml.safe_load(LOCAL_VALUES.read_text())["env"]}
    env = _env(_values(deployment, Overrides()))
    assert {name: env[name] for name in local} == local
    overridden = _values(
        deployment,
        Overrides(
            env={"KAI_SCALE_RESULTS_BUCKET": "kai-scale-bench-1234"},
            config={"logging": {"remote_base_log_folder": "s3://kai-scale-bench-1234/airflow-logs"}},
        ),
    )
    assert _env(overridden)["KAI_SCALE_RESULTS_BUCKET"] == "kai-scale-bench-1234"
    assert overridden["config"] == {
        "logging": {"remote_base_log_folder": "s3://kai-scale-bench-1234/airflow-logs"}
    }


def test_a_services_own_settings_go_to_it_alone(deployment: AirflowDeployment) -> None:
    """The chart's <service>.env: an upgrade that changes them restarts that service and no other pod."""
    prefix = {"name": "KAI_SCALE_RESULTS_PREFIX", "value": "test-view/Public/"}
    url = {"name": "KAI_SCALE_RESULTS_URL", "value": "ftp://refused/"}
    component_env = {
        "apiServer": {prefix["name"]: prefix["value"]},
        "dagProcessor": {url["name"]: url["value"]},
    }
    values = _values(deployment, Overrides(component_env=component_env))
    assert values["apiServer"] == {"env": [prefix]}
    assert values["dagProcessor"] == {"env": [url]}
    assert not {"KAI_SCALE_RESULTS_PREFIX", "KAI_SCALE_RESULTS_URL"} & _env(values).keys()
    assert "KAI_SCALE_RESULTS_PREFIX" not in _env(values)
    assert "apiServer" not in _values(deployment, Overrides())


def test_a_services_own_setting_may_not_repeat_the_release_wide_one(deployment: AirflowDeployment) -> None:
    """An env name twice in a pod: Kubernetes' patch of the Deployment dropped it on upgrade."""
    with pytest.raises(ValueError, match="dagProcessor's env repeats the release's: KAI_SCALE_RESULTS_URL"):
        _values(
            deployment,
            Overrides(
                env={"KAI_SCALE_RESULTS_URL": "https://results.example/"},
                component_env={"dagProcessor": {"KAI_SCALE_RESULTS_URL": "ftp://refused/"}},
            ),
        )


def test_added_connections_are_listed_after_the_shipped_ones_and_may_not_repeat_them(
    deployment: AirflowDeployment,
) -> None:
    """Helm replaces lists: the shipped connections are kept; one of them again would be a second entry."""
    shipped = yaml.safe_load(VALUES.read_text())["secret"]
    webhook = {"conn_type": "http", "host": "http://hooks.example/"}
    values = _values(deployment, Overrides(connections={"alerts_webhook": webhook}))
    added = {"envName": "AIRFLOW_CONN_ALERTS_WEBHOOK", "secretName": CONNECTIONS}
    assert values["secret"] == [*shipped, {**added, "secretKey": "alerts_webhook"}]
    with pytest.raises(ValueError, match="connections the release already has: aws_default"):
        _values(deployment, Overrides(connections={"aws_default": webhook}))


def test_scenario_files_reach_every_pod_beside_the_shipped_volumes(deployment: AirflowDeployment) -> None:
    """Helm replaces lists: the shipped values' volumes (the target cluster's kubeconfig) are kept."""
    shipped = yaml.safe_load(VALUES.read_text())
    files = {"standin-hangs.yaml": "name: standin-hangs\n"}
    values = _values(deployment, Overrides(scenarios=files))
    assert _env(values)["KAI_SCALE_SCENARIOS_DIR"] == SCENARIOS_IN_POD
    assert values["volumes"] == [*shipped["volumes"], {"name": SCENARIOS, "configMap": {"name": SCENARIOS}}]
    assert values["volumeMounts"][: len(shipped["volumeMounts"])] == shipped["volumeMounts"]
    assert values["volumeMounts"][-1]["mountPath"] == SCENARIOS_IN_POD
    changed = _values(
        deployment, Overrides(scenarios={**files, "small-workload.yaml": "name: small-workload\n"})
    )
    assert values["airflowPodAnnotations"] != changed["airflowPodAnnotations"], "new files restart the pods"
    plain = _values(deployment, Overrides())
    assert not {"volumes", "volumeMounts", "airflowPodAnnotations"} & plain.keys()
    assert "KAI_SCALE_SCENARIOS_DIR" not in _env(plain)


def test_added_connections_reach_every_pod_from_the_connections_secret(deployment: AirflowDeployment) -> None:
    """Helm replaces lists: the shipped connections stay; the added ones come from the same Secret.

    The Secret's keys are read by the deployment's tests: their alerts arrive through them.
    """
    shipped = yaml.safe_load(VALUES.read_text())
    smtp = {"conn_type": "smtp", "host": "10.244.0.1", "port": 25025}
    overrides = Overrides(connections={"alerts_smtp": smtp})
    values = _values(deployment, overrides)
    added = {"envName": "AIRFLOW_CONN_ALERTS_SMTP", "secretName": CONNECTIONS, "secretKey": "alerts_smtp"}
    assert values["secret"] == [*shipped["secret"], added]
    assert "secret" not in _values(deployment, Overrides())


def _pod(name: str, *, restarts: int, exit_code: int, finished: str) -> dict[str, Any]:
    """A pod as ``kubectl get pods --output=json`` lists it: one container, restarted ``restarts`` times."""
    ended = {"exitCode": exit_code, "finishedAt": finished, "reason": "Error"}
    container = {"name": "api-server", "restartCount": restarts, "lastState": {"terminated": ended}}
    return {"metadata": {"name": name}, "status": {"containerStatuses": [container]}}


DEPLOY_BEGAN = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def test_a_container_that_failed_once_since_the_deploy_and_came_back_does_not_stop_it() -> None:
    """The api-server lost Flask-AppBuilder's permission race to the create-user job once, then started."""
    pods = [_pod("airflow-api-server-0", restarts=1, exit_code=1, finished="2026-11-28T12:00:40Z")]
    assert container_that_cannot_start(pods, since=DEPLOY_BEGAN) is None


def test_a_container_that_failed_again_after_its_restart_stops_the_deploy_naming_it() -> None:
    pods = [
        _pod("airflow-scheduler-0", restarts=0, exit_code=0, finished="2026-11-28T12:00:10Z"),
        _pod("airflow-api-server-0", restarts=2, exit_code=1, finished="2026-11-28T12:01:05Z"),
    ]
    assert container_that_cannot_start(pods, since=DEPLOY_BEGAN) == "airflow-api-server-0/api-server"


def test_failures_before_the_deploy_began_and_clean_exits_are_not_its() -> None:
    pods = [
        _pod("airflow-api-server-0", restarts=5, exit_code=1, finished="2026-11-28T11:59:59Z"),
        _pod("airflow-triggerer-0", restarts=3, exit_code=0, finished="2026-11-28T12:02:00Z"),
    ]
    assert container_that_cannot_start(pods, since=DEPLOY_BEGAN) is None
