"""Fixtures that start the local environment once per session (or reuse one started by `make local-up`)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from kai_scale.cluster.tasks import setup_step
from kai_scale.cluster.teardown import teardown
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.metrics.prometheus_api import PrometheusClient, PrometheusError
from kai_scale.settings import PipelineSettings
from localenv import exports
from localenv.environment import LocalEnvironment
from localenv.settings import Settings
from localenv.source_images import BuiltImages
from tests.conftest import REPO
from tests.integration.real_kai import kai_leftovers, switch_scheduler, wait_until_scheduler_serves
from tests.waiting import wait_for

TEST_LABEL = "kai-scale.dev/test"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)
    # A restart gives the cluster a new CA: the session's API clients would no longer trust it.
    items.sort(key=lambda item: item.get_closest_marker("restarts_local_env") is not None)


@pytest.fixture(scope="session")
def local_env() -> Iterator[LocalEnvironment]:
    """The running local environment; started here (with an empty NodePool) and stopped after, if needed.

    One already running gets the images of this checkout first (``up`` on a running environment pushes
    what changed, images.sh built it): no test runs a runner, KAI or Airflow an earlier checkout built.
    """
    environment = LocalEnvironment(Settings.from_environment())
    started_here = not environment.is_up()
    environment.up(node_count=0)
    yield environment
    if started_here:
        environment.down()


@pytest.fixture(scope="session")
def api_client(local_env: LocalEnvironment) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(local_env.config.kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration)


@pytest.fixture(scope="session")
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def namespace(core: client.CoreV1Api) -> Iterator[str]:
    """A fresh namespace for one test, labelled as a test's, deleted afterwards with all its pods.

    It is handed over once its ``default`` ServiceAccount exists: until the controller manager makes it,
    the API server refuses every pod of the namespace. The deletion is waited for: a pod left holding a
    GPU makes the next test's run refuse to start.
    """
    name = f"test-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name, "labels": {TEST_LABEL: "true"}}})
    try:
        wait_for(
            lambda: core.list_namespaced_service_account(name, field_selector="metadata.name=default").items,
            timeout=60,
            what=f"the default ServiceAccount of namespace {name}",
        )
        yield name
    finally:
        core.delete_namespace(name, grace_period_seconds=0)
        wait_for(lambda: _namespace_gone(core, name), timeout=120, what=f"namespace {name} to be deleted")


def _namespace_gone(core: client.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespace(name)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


# How long the local Prometheus must have had rates for, before a test reads a window of them.
PROMETHEUS_HISTORY = timedelta(seconds=20)


@pytest.fixture(scope="session")
def monitoring(airflow_on_local_env: dict[str, str]) -> str:
    """The monitoring stack, installed by the pipeline's own setup steps; its Prometheus' URL."""
    settings = PipelineSettings.from_environment(default_include_dir=REPO / "include")
    setup_step("install_monitoring").run(settings=settings)
    setup_step("install_service_monitors").run(settings=settings)
    return airflow_on_local_env["PROMETHEUS_URL"]


@pytest.fixture(scope="session")
def prometheus(monitoring: str) -> Iterator[PrometheusClient]:
    """The pipeline's Prometheus, once rate() over [1m] has had values for ``PROMETHEUS_HISTORY``.

    A freshly started Prometheus has rate() values only from its second scrape (every 15 s) on; a
    scenario window or a test's window needs a few steps of them. (Its pod starts after helm's wait:
    the operator makes it.)
    """
    with PrometheusClient(monitoring) as prometheus_client:

        def has_history() -> bool:
            try:
                at = datetime.now(UTC) - PROMETHEUS_HISTORY
                return bool(prometheus_client.query("sum(rate(apiserver_request_total[1m]))", at=at))
            except PrometheusError:  # not serving yet
                return False

        wait_for(
            has_history,
            timeout=300,
            what=f"Prometheus to have had API server request rates for {PROMETHEUS_HISTORY.seconds} s",
            interval=2,
        )
        yield prometheus_client


@pytest.fixture(scope="session")
def airflow_on_local_env(local_env: LocalEnvironment) -> Iterator[dict[str, str]]:
    """Airflow's connections and the pipeline's settings pointed at the local environment.

    As a task's environment has them; the hooks and steps read connections from it, not from a
    metadata database (the tests' own Airflow has none: every night runs on the deployed one).
    """
    exported = exports.variables(local_env)
    saved = {name: os.environ.get(name) for name in exported}
    os.environ.update(exported)
    yield exported
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def kai(local_env: LocalEnvironment, core: client.CoreV1Api) -> BuiltImages:
    """The real KAI, installed as the environment installs it (here, if it runs without), serving."""
    local_env.install_kai()
    wait_until_scheduler_serves(core)
    return local_env.built_images()


@pytest.fixture
def kai_scheduler_off(
    kai: BuiltImages, local_env: LocalEnvironment, core: client.CoreV1Api
) -> Iterator[None]:
    """KAI installed but not serving: its scheduler switched off in kai-config, as KAI's suite does."""
    switch_scheduler(local_env, core, enabled=False)
    yield
    switch_scheduler(local_env, core, enabled=True)


@pytest.fixture(scope="class")  # a test outside a class has it to itself
def without_kai(kai: BuiltImages, local_env: LocalEnvironment, core: client.CoreV1Api) -> Iterator[None]:
    """A cluster without KAI: uninstalled, nothing of it left; installed again after the test or class."""
    local_env.uninstall_kai()
    assert not kai_leftovers(local_env), "uninstall_kai leaves nothing of KAI behind"
    yield
    local_env.install_kai()
    wait_until_scheduler_serves(core)


@pytest.fixture(scope="session")
def prepared_cluster(airflow_on_local_env: dict[str, str]) -> None:
    """What a run's setup installs, by the pipeline's own steps.

    KWOK's stages, kwok-operator and the fake GPU operator, which gives the KWOK nodes their GPUs;
    managed-nodepool is absent afterwards, as after a night's teardown.
    """
    settings = PipelineSettings.from_environment(default_include_dir=REPO / "include")
    setup_step("install_kwok").run(settings=settings)
    setup_step("size_node_pool").run(settings=settings, params={"node_count": 0})
    setup_step("install_fake_gpu_operator").run(settings=settings)
    # Ended as a night ends: its teardown removes the pool it created; the operators stay.
    with ClusterHook(conn_id="kubernetes_default") as cluster:
        teardown(cluster, run_id="prepared-cluster", existing=None)


@pytest.fixture
def cluster(airflow_on_local_env: dict[str, str]) -> Iterator[ClusterHook]:
    """The pipeline's hook on the local cluster (connection ``kubernetes_default``), closed afterwards."""
    with ClusterHook(conn_id="kubernetes_default") as hook:
        yield hook
