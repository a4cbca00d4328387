"""Whether the KAI scheduler is installed in the cluster the runner pod runs in."""

from __future__ import annotations

from kubernetes import client
from kubernetes.client.rest import ApiException

# KAI's Queue CRD: every KAI installation has it, and the suite cannot run without it.
KAI_QUEUE_CRD = "queues.scheduling.run.ai"


def kai_missing_reason(api_client: client.ApiClient) -> str | None:
    """Why KAI counts as not installed, or None when it is."""
    try:
        client.ApiextensionsV1Api(api_client).read_custom_resource_definition(KAI_QUEUE_CRD)
    except ApiException as error:
        if error.status == 404:
            return f"KAI not installed: CRD {KAI_QUEUE_CRD} not found"
        raise
    return None
