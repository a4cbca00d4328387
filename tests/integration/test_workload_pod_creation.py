"""The workload's pod creation against the real API server, as a runner pod's ServiceAccount."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes_asyncio.client import ApiClient, CoreV1Api

from kai_scale_model.waiting import Deadline
from kai_scale_runner.workload import _configuration, _create_pods, _watch_bindings
from localenv.environment import LocalEnvironment

ALLOWED = "pod-creator"
FORBIDDEN = "no-rights"


def _token_kubeconfig(
    *, local_env: LocalEnvironment, core: client.CoreV1Api, namespace: str, account: str, path: Path
) -> None:
    """Write to ``path`` a kubeconfig with a token of ``account``, to run the runner's code as it."""
    core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    token = core.create_namespaced_service_account_token(
        account, namespace, {"spec": {"audiences": [], "expirationSeconds": 600}}
    )
    admin = yaml.safe_load(local_env.config.kubeconfig.read_text())
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": account, "user": {"token": token.status.token}}],
        "contexts": [{"name": "pod", "context": {"cluster": "local", "user": account}}],
        "current-context": "pod",
    }
    path.write_text(yaml.safe_dump(kubeconfig))


def _allow_pod_creation(api_client: client.ApiClient, namespace: str) -> None:
    rbac = client.RbacAuthorizationV1Api(api_client)
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": ALLOWED},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": ALLOWED},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ALLOWED},
            "subjects": [{"kind": "ServiceAccount", "name": ALLOWED, "namespace": namespace}],
        },
    )


def _bodies(names: list[str]) -> list[bytes]:
    # A scheduler name nobody serves keeps the pods Pending: only creation is under test. The account
    # is named so admission need not wait for the namespace's default one to appear.
    return [
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name},
                "spec": {
                    "schedulerName": "none",
                    "serviceAccountName": ALLOWED,
                    "automountServiceAccountToken": False,
                    "containers": [{"name": "c", "image": "pause"}],
                },
            }
        ).encode()
        for name in names
    ]


def _create(*, namespace: str, names: list[str], concurrency: int) -> None:
    """Create the pods as the runner does: credentials from ``KUBECONFIG``."""

    async def create() -> None:
        configuration = await _configuration(concurrency)
        async with ApiClient(configuration) as api:
            await _create_pods(
                api=api,
                url=f"{configuration.host}/api/v1/namespaces/{namespace}/pods",
                bodies=iter(_bodies(names)),
                concurrency=concurrency,
            )

    asyncio.run(create())


@pytest.fixture
def kubeconfig_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Where the test writes the ServiceAccount's kubeconfig; KUBECONFIG points there."""
    path = tmp_path / "kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path


def test_every_pod_is_created_once_with_the_service_accounts_token(
    local_env: LocalEnvironment,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    kubeconfig_env: Path,
) -> None:
    _allow_pod_creation(api_client, namespace)
    _token_kubeconfig(
        local_env=local_env, core=core, namespace=namespace, account=ALLOWED, path=kubeconfig_env
    )
    names = [f"load-{index}" for index in range(60)]

    _create(namespace=namespace, names=names, concurrency=8)

    created = core.list_namespaced_pod(namespace).items
    assert sorted(pod.metadata.name for pod in created) == sorted(names)
    with pytest.raises(RuntimeError, match=r"creating pod load-7 failed: HTTP 409 .*AlreadyExists"):
        _create(namespace=namespace, names=["load-7"], concurrency=1)


def test_a_refused_creation_names_the_pod_and_the_reason(
    local_env: LocalEnvironment, core: client.CoreV1Api, namespace: str, kubeconfig_env: Path
) -> None:
    _token_kubeconfig(
        local_env=local_env, core=core, namespace=namespace, account=FORBIDDEN, path=kubeconfig_env
    )

    with pytest.raises(RuntimeError, match=r"creating pod refused-0 failed: HTTP 403 .*forbidden"):
        _create(namespace=namespace, names=["refused-0"], concurrency=1)
    assert core.list_namespaced_pod(namespace).items == []


def test_a_watch_that_lost_its_history_resumes_from_a_fresh_list(
    namespace: str, core: client.CoreV1Api, local_env: LocalEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server answers a watch from a resourceVersion it no longer holds with a 410 ERROR event.

    The workload lists again and finds the pod bound meanwhile, instead of re-watching the lost
    version until its deadline.
    """
    monkeypatch.setenv("KUBECONFIG", str(local_env.config.kubeconfig))
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "bound", "labels": {"kai-scale.dev/role": "watched"}},
            # Bound at creation: nothing has to schedule it for the watch to count it.
            "spec": {"nodeName": "nowhere", "containers": [{"name": "main", "image": "pause"}]},
        },
    )

    async def watch() -> dict[str, float]:
        scheduled_at: dict[str, float] = {}
        async with ApiClient(await _configuration(4)) as api:
            await _watch_bindings(
                core=CoreV1Api(api),
                namespace=namespace,
                selector="kai-scale.dev/role=watched",
                resource_version="1",  # long compacted away in any cluster that has run a while
                scheduled_at=scheduled_at,
                expected=1,
                deadline=Deadline(seconds=20),
            )
        return scheduled_at

    assert set(asyncio.run(watch())) == {"bound"}
