"""KAI's Deployments as its operator renders them and the API serves them (JSON field names), for tests."""

from __future__ import annotations

from typing import Any


def kai_deployment(
    name: str,
    *,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    args: list[str] | None = None,
    replicas: int = 1,
    generation: int = 3,
    observed: int | None = None,
    updated: int | None = None,
    current: int | None = None,
    available: int | None = None,
) -> dict[str, Any]:
    """One Deployment: a container of its own name, rolled out unless the status counts say otherwise.

    Requests and limits not given are KAI's defaults (50m/256Mi, 100m/512Mi), as the operator fills
    them in; zero counts are left out of the status, as the API server leaves them out.
    """
    status = {
        "observedGeneration": generation if observed is None else observed,
        "replicas": replicas if current is None else current,
        "updatedReplicas": replicas if updated is None else updated,
        "availableReplicas": replicas if available is None else available,
        "readyReplicas": replicas,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": "kai-scheduler",
            "generation": generation,
            "labels": {"app": name, "app.kubernetes.io/managed-by": "kai-operator"},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "Recreate"},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "serviceAccountName": name,
                    "containers": [
                        {
                            "name": name,
                            "image": f"registry.local/kai-scheduler/{name}:v0.0.0",
                            "args": args or [],
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "256Mi", **(requests or {})},
                                "limits": {"cpu": "100m", "memory": "512Mi", **(limits or {})},
                            },
                        }
                    ],
                },
            },
        },
        "status": {key: value for key, value in status.items() if value},
    }


# The scale profile's Deployments as KAI's operator renders them (in canonical quantities: 3 CPUs is
# "3", 2500Mi stays 2500Mi), each with arguments the profile does not set around the ones it does.
def scale_deployments() -> dict[str, dict[str, Any]]:
    """Namespace kai-scheduler with the scale profile rolled out."""
    requests, limits = {"cpu": "100m", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}
    deployments = [
        kai_deployment("admission", replicas=4, args=["--webhook-port=9443"]),
        kai_deployment(
            "binder",
            requests={"cpu": "100m", "memory": "2500Mi"},
            limits={"cpu": "400m", "memory": "2500Mi"},
            args=[
                "--scheduler-name",
                "kai-scheduler",
                "--max-concurrent-reconciles=100",
                "--plugins",
                "{}",
                "--fake-gpu-nodes",
            ],
        ),
        kai_deployment(
            "kai-scheduler-default",
            requests={"cpu": "3", "memory": "7Gi"},
            limits={"cpu": "5", "memory": "7Gi"},
            args=[
                "--scheduler-conf=/config/config.yaml",
                "--scheduler-name=kai-scheduler",
                "--max-consolidation-preemptees=0",
                "--pyroscope-address=http://pyroscope.monitoring.svc.cluster.local.:4040",
            ],
        ),
        kai_deployment("pod-grouper", requests=requests, limits=limits),
        kai_deployment("podgroup-controller", requests=requests, limits=limits),
        kai_deployment("queue-controller", requests=requests, limits=limits),
        kai_deployment("kai-operator"),
    ]
    return {d["metadata"]["name"]: d for d in deployments}
