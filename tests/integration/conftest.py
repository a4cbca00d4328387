"""Fixtures that start the local environment once per session (or reuse one started by `make local-up`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client, config

from localenv.environment import LocalEnvironment
from localenv.settings import Settings

TEST_LABEL = "kai-scale.dev/test"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def local_env() -> Iterator[LocalEnvironment]:
    """The running local environment; started here (with an empty NodePool) and stopped after, if needed."""
    environment = LocalEnvironment(Settings.from_environment())
    started_here = not environment.is_up()
    if started_here:
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
    """A fresh namespace for one test, labelled as a test's and deleted afterwards."""
    name = f"test-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name, "labels": {TEST_LABEL: "true"}}})
    yield name
    core.delete_namespace(name, grace_period_seconds=0)
