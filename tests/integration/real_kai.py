"""The local environment's real KAI, as tests drive it.

Its scheduler switched off and on as KAI's suite does, and what an uninstall must not leave behind.
"""

from __future__ import annotations

from kubernetes import client

from kai_scale_model import kai
from kai_scale_runner.kai_detection import serving
from localenv.environment import LocalEnvironment
from localenv.kai import RESERVATION_NAMESPACE
from tests.waiting import wait_for


def scheduler_pods(core: client.CoreV1Api) -> list[client.V1Pod]:
    return list(core.list_namespaced_pod(kai.NAMESPACE, label_selector=f"app={kai.SCHEDULER_APP}").items)


def wait_until_scheduler_serves(core: client.CoreV1Api) -> None:
    """Until the scheduler's one pod serves and no other is left.

    The operator may roll the scheduler out twice in a row (its Deployment, then the shard's tuning):
    the first pod's readiness alone would let a test start while the pod that will serve is not up.
    """

    def one_serving() -> bool:
        pods = scheduler_pods(core)
        return len(pods) == 1 and serving(pods[0])

    wait_for(one_serving, timeout=120, what="the one pod of KAI's scheduler to run and be ready")


def switch_scheduler(local_env: LocalEnvironment, core: client.CoreV1Api, *, enabled: bool) -> None:
    """kai-config's scheduler switched off or on, then the operator's reaction waited for."""
    patch = f'{{"spec":{{"scheduler":{{"service":{{"enabled":{str(enabled).lower()}}}}}}}}}'
    local_env.kubectl("patch", "configs.kai.scheduler", "kai-config", "--type=merge", f"--patch={patch}")
    if enabled:
        wait_until_scheduler_serves(core)
    else:
        wait_for(
            lambda: not scheduler_pods(core), timeout=90, what="the operator to remove the scheduler's pods"
        )


def kai_leftovers(local_env: LocalEnvironment) -> list[str]:
    """KAI's CRDs, webhooks and namespaces still in the cluster."""
    kinds = "crd,validatingwebhookconfigurations,mutatingwebhookconfigurations,namespaces"
    return [name for name in local_env.kubectl("get", kinds, "--output=name").split() if _kais(name)]


def _kais(name: str) -> bool:
    kind, _, object_name = name.partition("/")
    if kind.startswith("customresourcedefinition"):
        return object_name.endswith((".kai.scheduler", ".scheduling.run.ai"))
    if kind.startswith("namespace"):
        return object_name in {kai.NAMESPACE, RESERVATION_NAMESPACE}
    return "kai" in object_name
