"""Airflow as its users run it, deployed once for this package's modules on a restarted, bare cluster.

The environment is restarted first, so the cluster holds what a cluster admin installed (KAI, built
from source) and nothing of the pipeline's; then the official chart 1.21.0 is installed as make demo
installs it (deploy/airflow/values.yaml, the local overlay) with release_settings. The modules run with
the other tests that restart the environment, after every other test (the restarted cluster has a new
CA); the release is removed after the last of them. The nights the modules read (nights.py) are run
once for the package, in order.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client, config

from localenv import exports
from localenv.airflow import AirflowDeployment
from localenv.airflow_api import AirflowApi
from localenv.airflow_values import Overrides
from localenv.demo import wait_for_dag
from localenv.environment import LocalEnvironment
from localenv.kai import RELEASE
from tests.alert_receivers import AlertReceivers, receiving_alerts
from tests.integration.airflow_deployment import nights
from tests.integration.airflow_deployment.cluster_state import BareCluster, infrastructure, releases
from tests.integration.airflow_deployment.nights import (
    ALERT_SETTINGS,
    Night,
    RefusedTeardown,
    deployed_scenario_files,
)

# What points boto3 and Airflow's connection in this process at the local bucket, and names it.
S3_VARIABLES = (
    "AWS_ENDPOINT_URL_S3",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "AIRFLOW_CONN_AWS_DEFAULT",
    "KAI_SCALE_RESULTS_BUCKET",
)


def release_settings(receivers: AlertReceivers) -> Overrides:
    """Deployment settings of the release under test, as an operator would set them.

    A lost worker's retry starts within seconds (the runner it reattaches to is still running), and a
    scheduler counts a killed one dead, and resets its tasks, within half a minute instead of five. Its
    scenario files are the shipped ones and the stand-ins (a ConfigMap, as a deployment changes its
    scenarios without an image). Its alerts go to ``receivers`` (ALERT_SETTINGS).
    """
    return Overrides(
        env={"KAI_SCALE_RETRY_DELAY_SECONDS": "5", **ALERT_SETTINGS},
        config={
            "scheduler": {"scheduler_health_check_threshold": "20", "orphaned_tasks_check_interval": "10"}
        },
        scenarios=deployed_scenario_files(),
        connections=receivers.connections(),
    )


@pytest.fixture(scope="package", autouse=True)
def bare_cluster(local_env: LocalEnvironment) -> BareCluster:
    """The environment restarted: KAI installed as an admin installs it, nothing of the pipeline's.

    Autouse, so it comes before the package's Airflow release (the restart would take it away).
    """
    local_env.down()
    local_env.up(node_count=0)
    local_env.install_kai()  # a no-op unless the environment runs without KAI (KAI_LOCALENV_KAI=0)
    return BareCluster(infrastructure=infrastructure(local_env), kai_revision=releases(local_env)[RELEASE])


@pytest.fixture(scope="package")
def core(bare_cluster: BareCluster, local_env: LocalEnvironment) -> client.CoreV1Api:
    """A client of the restarted cluster (the session's trusts the CA of the cluster before it)."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(local_env.config.kubeconfig), client_configuration=configuration)
    return client.CoreV1Api(client.ApiClient(configuration))


@pytest.fixture(scope="package")
def s3_from_this_machine(local_env: LocalEnvironment) -> Iterator[dict[str, str]]:
    """The local bucket, read from this process as the deployment reads it (boto3, the Airflow connection).

    Yields the variables set (S3_VARIABLES), for what needs a value, such as the bucket's name.
    """
    exported = exports.variables(local_env)
    variables = {name: exported[name] for name in S3_VARIABLES}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in variables.items():
            patch.setenv(name, value)
        yield variables


@pytest.fixture(scope="package")
def alerts(local_env: LocalEnvironment, bare_cluster: BareCluster) -> Iterator[AlertReceivers]:
    """A mail server and a webhook on the pod bridge's address, where a team's relay and hook stand.

    The guard lets pods reach their ports (``Ports.alert_mail``, ``Ports.alert_webhook``).
    """
    ports = local_env.config.ports
    with receiving_alerts(
        host=str(local_env.config.pod_network.gateway),
        mail_port=ports.alert_mail,
        webhook_port=ports.alert_webhook,
    ) as receivers:
        yield receivers


@pytest.fixture(scope="package")
def airflow_deployment(
    local_env: LocalEnvironment, bare_cluster: BareCluster, alerts: AlertReceivers
) -> Iterator[AirflowDeployment]:
    """Airflow as make demo deploys it, with ``release_settings``: the official chart, the local PostgreSQL.

    Removed after the package: its services poll the database and probe themselves all the time, a
    load the other tests' measurements on this 2-CPU machine should not carry.
    """
    deployment = AirflowDeployment(local_env)
    deployment.deploy(release_settings(alerts))
    yield deployment
    deployment.uninstall()


@pytest.fixture(scope="package")
def airflow_api(airflow_deployment: AirflowDeployment) -> Iterator[AirflowApi]:
    """The deployment's REST API through its UI's port on loopback, logged in as its first user."""
    with airflow_deployment.served_api() as api:
        yield api


@pytest.fixture(scope="package")
def first_night(airflow_api: AirflowApi, core: client.CoreV1Api, local_env: LocalEnvironment) -> Night:
    """nights.first_night: KAI's real suite on the bare cluster, its workers and scheduler lost."""
    wait_for_dag(airflow_api)
    return nights.first_night(airflow_api, core, local_env)


@pytest.fixture(scope="package")
def second_night(
    first_night: Night,
    airflow_api: AirflowApi,
    core: client.CoreV1Api,
    local_env: LocalEnvironment,
    alerts: AlertReceivers,
) -> Night:
    """nights.second_night: the stand-in scenarios on the first night's setup, with faults; one cleared."""
    if first_night.state != "success":
        pytest.fail(f"the first night {first_night.run_id} ended {first_night.state}: no second night on it")
    return nights.second_night(airflow_api, core, local_env, alerts)


@pytest.fixture(scope="package")
def night_without_its_cluster(
    second_night: Night, airflow_api: AirflowApi, core: client.CoreV1Api, local_env: LocalEnvironment
) -> Night:
    """nights.night_without_its_cluster, after the others (it changes the cluster connection for its run)."""
    return nights.night_without_its_cluster(airflow_api, core, local_env)


@pytest.fixture(scope="package")
def night_with_a_missing_runner_image(
    airflow_api: AirflowApi,
    local_env: LocalEnvironment,
    alerts: AlertReceivers,
) -> tuple[Night, RefusedTeardown]:
    """nights.night_with_a_missing_runner_image (its tests follow the third night's)."""
    return nights.night_with_a_missing_runner_image(airflow_api, local_env, alerts)


@pytest.fixture(scope="package")
def night_slower_than_its_history(
    airflow_api: AirflowApi,
    local_env: LocalEnvironment,
    s3_from_this_machine: dict[str, str],
) -> Night:
    """nights.night_slower_than_its_history (its tests come last): its history published from here first."""
    return nights.night_slower_than_its_history(airflow_api, local_env)
