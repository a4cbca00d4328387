"""Whether the KAI scheduler can serve a scenario in the cluster the runner pod runs in.

Ready means installed (its Queue CRD exists) and its scheduler serving: a pod of the scheduler's
Deployment running and ready. KAI's operator names that Deployment ``<schedulerName>-<shard>``
(``pkg/operator/operands/scheduler``: ``DeploymentName``) in KAI's namespace and labels its pods
``app=<that name>``; KAI's suite waits for exactly these pods when it turns the scheduler on
(``test/e2e/modules/constant``). Pods, not the Deployment: the runner may list pods everywhere already
(include/manifests/runner-rbac.yaml), and a pod's Ready condition is what says it is serving.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubernetes.client import ApiextensionsV1Api, CoreV1Api, V1Pod
from kubernetes.client.rest import ApiException

from kai_scale_model import kai
from kai_scale_model.waiting import wait_for

# How long a scheduler that is not serving is waited for: the operator recreates its pod when KAI's
# tuning changes, which the setup has just applied.
READY_TIMEOUT_SECONDS = 60.0
POLL_SECONDS = 2.0


def serving(pod: V1Pod) -> bool:
    """Whether a pod is running, ready and not being deleted."""
    status = pod.status
    return (
        pod.metadata.deletion_timestamp is None
        and status is not None
        and status.phase == "Running"
        and any(c.type == "Ready" and c.status == "True" for c in status.conditions or [])
    )


def _state(pod: V1Pod) -> str:
    phase = (pod.status.phase if pod.status else None) or "no status"
    if pod.metadata.deletion_timestamp is not None:
        return f"{phase}, being deleted"
    return f"{phase}, not ready" if phase == "Running" else phase


def scheduler_not_serving_reason(pods: Sequence[V1Pod]) -> str | None:
    """Why none of the scheduler's pods serves, naming each and its state; None when one does."""
    if any(serving(pod) for pod in pods):
        return None
    found = ", ".join(f"{pod.metadata.name} ({_state(pod)})" for pod in pods) or "none"
    return (
        f"KAI not ready: its scheduler is not serving (no running, ready pod app={kai.SCHEDULER_APP} "
        f"in namespace {kai.NAMESPACE}; pods: {found})"
    )


def kai_not_ready_reason(
    *,
    extensions: ApiextensionsV1Api,
    core: CoreV1Api,
    timeout: float = READY_TIMEOUT_SECONDS,
    poll: float = POLL_SECONDS,
) -> str | None:
    """Why KAI cannot serve a scenario, or None when it can.

    A missing CRD is said at once; a scheduler that is not serving is waited for up to ``timeout``
    seconds, polling every ``poll``.
    """
    try:
        extensions.read_custom_resource_definition(kai.QUEUE_CRD)
    except ApiException as error:
        if error.status == 404:
            return f"KAI not installed: CRD {kai.QUEUE_CRD} not found"
        raise
    try:
        wait_for(
            lambda: scheduler_not_serving_reason(
                core.list_namespaced_pod(kai.NAMESPACE, label_selector=f"app={kai.SCHEDULER_APP}").items
            ),
            until=lambda reason: reason is None,
            what="KAI's scheduler serving",
            timeout=timeout,
            interval=poll,
            error=_NotServing,
        )
    except _NotServing as not_serving:
        return str(not_serving)
    return None


class _NotServing(Exception):
    """KAI's scheduler was not serving at the deadline; the message is why."""
