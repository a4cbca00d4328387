"""Running a ``workload`` scenario: create GPU pods on the KWOK nodes and time their scheduling.

Asynchronous and on raw JSON so the load generator is not the bottleneck: pods are created with
``create_concurrency`` requests in flight, and bindings are observed on one watch whose events are
parsed as plain JSON (building client objects for thousands of events would lag the clock).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

from kai_scale_model import labels
from kai_scale_model.outcome import TestResult
from kai_scale_model.scenario import Scenario, WorkloadRun
from kai_scale_model.waiting import Deadline, wait_for_async
from kai_scale_runner.throughput import throughput

log = logging.getLogger(__name__)

TEST_NAME = "GPU pod scheduling throughput"
KWOK_TAINT_KEY = "kwok.x-k8s.io/node"


@dataclass(frozen=True, kw_only=True)
class WorkloadResult:
    """What the workload measured."""

    test: TestResult
    """The measurement in the suite's shape."""
    all_scheduled: bool
    """Whether every pod was bound before the deadline."""


def pod_body(*, name: str, run: WorkloadRun, pod_labels: dict[str, str]) -> dict[str, Any]:
    """One workload pod: GPUs from the KWOK nodes, tolerating their taint, never really run."""
    gpus = str(run.gpus_per_pod)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {**run.pod_labels, **pod_labels}},
        "spec": {
            "schedulerName": run.scheduler_name,
            "nodeSelector": run.node_selector,
            "tolerations": [{"key": KWOK_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": 0,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "job",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
                }
            ],
        },
    }


async def _configuration(pool_size: int) -> client.Configuration:
    """KUBECONFIG when set (the runner run outside a pod), else the pod's in-cluster account."""
    configuration = client.Configuration()
    try:
        # Read KUBECONFIG now: the library reads its default path once, when it is imported.
        await config.load_kube_config(
            config_file=os.environ.get("KUBECONFIG"), client_configuration=configuration
        )
    except config.ConfigException:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = pool_size
    return configuration


async def _delete_pods(core: client.CoreV1Api, namespace: str, selector: str) -> None:
    await core.delete_collection_namespaced_pod(namespace, label_selector=selector, grace_period_seconds=0)
    await wait_for_async(
        lambda: core.list_namespaced_pod(namespace, label_selector=selector, limit=1),
        until=lambda remaining: not remaining.items,
        what=f"workload pods ({selector}) deleted",
        timeout=300,
        interval=1,
        error=lambda _: RuntimeError(f"workload pods ({selector}) still exist 300 s after deleting them"),
    )


async def _watch_bindings(
    *,
    core: client.CoreV1Api,
    namespace: str,
    selector: str,
    resource_version: str,
    scheduled_at: dict[str, float],
    expected: int,
    deadline: Deadline,
) -> None:
    """Record when each pod is first seen bound to a node, until all ``expected`` are or the deadline.

    A watch the server ends with 410 Gone (its history no longer reaches our resourceVersion) is
    resumed from a fresh list; any other error event ends the measurement with that error. A watch
    that ends at once is not reopened at once, so a refusing server is not hammered. Not
    ``wait_for_async``: the watch itself waits, and its events are recorded as they come.
    """
    while len(scheduled_at) < expected and not deadline.passed():
        opened = time.monotonic()
        remaining = max(1, int(deadline.remaining()))
        # Raw stream (_preload_content=False): the generated type hints describe the parsed list instead.
        response: Any = await core.list_namespaced_pod(
            namespace,
            label_selector=selector,
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=min(300, remaining),
            _preload_content=False,
        )
        # The server should end the watch at timeoutSeconds, but was seen to keep it open: bound it here too.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(300, remaining) + 5), response:
                async for raw in response.content:
                    event = json.loads(raw)
                    if event["type"] == "ERROR":
                        resource_version = await _after_watch_error(
                            core,
                            namespace=namespace,
                            selector=selector,
                            status=event["object"],
                            scheduled_at=scheduled_at,
                        )
                        break
                    pod = event["object"]
                    resource_version = pod["metadata"].get("resourceVersion", resource_version)
                    if event["type"] in ("ADDED", "MODIFIED") and pod.get("spec", {}).get("nodeName"):
                        scheduled_at.setdefault(pod["metadata"]["name"], time.monotonic())
                        if len(scheduled_at) >= expected:
                            return
        if time.monotonic() - opened < 1:
            await asyncio.sleep(1)


async def _after_watch_error(
    core: client.CoreV1Api,
    *,
    namespace: str,
    selector: str,
    status: dict[str, Any],
    scheduled_at: dict[str, float],
) -> str:
    """Resume after an ERROR event: 410 Gone lists the pods again; anything else is raised."""
    if status.get("code") != HTTPStatus.GONE:
        raise RuntimeError(
            f"watching the workload's pods failed: {status.get('code')} {status.get('reason')}: "
            f"{status.get('message')}"
        )
    listing = await core.list_namespaced_pod(namespace, label_selector=selector)
    now = time.monotonic()
    for pod in listing.items:
        if pod.spec.node_name:
            # Bound while the watch was lost: the time it was seen is an upper bound.
            scheduled_at.setdefault(pod.metadata.name, now)
    return str(listing.metadata.resource_version)


async def _create_pods(*, api: client.ApiClient, url: str, bodies: Iterator[bytes], concurrency: int) -> None:
    """POST the JSON ``bodies`` with ``concurrency`` workers sharing the client's connection pool.

    Plain aiohttp instead of the generated method: the client's session trusts the environment, so
    every request looked up proxies and ~/.netrc in worker threads, and the generated method walks the
    body before serializing it. That cost ~1.4 ms of generator CPU per pod; this ~0.6 ms (2 cores,
    see docs/benchmarks.md), leaving the CPU to the API server.
    """
    # Read once: a refreshed in-cluster token stays valid far longer than the creation takes.
    headers: dict[str, str] = {"Content-Type": "application/json", "Accept": "application/json"}
    await api.update_params_for_auth(headers, [], ["BearerToken"])
    rest = api.rest_client
    extra: dict[str, Any] = {"server_hostname": rest.server_hostname} if rest.server_hostname else {}
    async with aiohttp.ClientSession(connector=rest.pool_manager.connector, connector_owner=False) as session:

        async def worker() -> None:
            for body in bodies:  # shared iterator: each body is taken by one worker
                async with session.post(url, data=body, headers=headers, **extra) as response:
                    # Reading the reply lets the connection be reused rather than closed.
                    reply = await response.read()
                    if response.status >= 300:
                        name = json.loads(body)["metadata"]["name"]
                        raise RuntimeError(f"creating pod {name} failed: HTTP {response.status} {reply!r}")

        await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _run(
    *, scenario: Scenario, run: WorkloadRun, node_count: int, namespace: str, run_id: str
) -> WorkloadResult:
    configuration = await _configuration(run.create_concurrency + 4)
    pods = node_count * run.pods_per_node
    pod_labels = labels.object_labels(run_id=run_id, scenario=scenario.name, role=labels.WORKLOAD)
    selector = labels.selector(pod_labels)
    async with client.ApiClient(configuration) as api:
        core = client.CoreV1Api(api)
        # A retry starts from nothing: remove what an earlier attempt left.
        await _delete_pods(core, namespace, selector)
        listing = await core.list_namespaced_pod(namespace, label_selector=selector)
        scheduled_at: dict[str, float] = {}
        # Leave time after the deadline to upload the outcome and then remove the pods.
        deadline = Deadline(seconds=max(scenario.timeout.total_seconds() - 120, 30))
        watcher = asyncio.create_task(
            _watch_bindings(
                core=core,
                namespace=namespace,
                selector=selector,
                resource_version=listing.metadata.resource_version,
                scheduled_at=scheduled_at,
                expected=pods,
                deadline=deadline,
            )
        )
        prefix = f"{labels.label_value(scenario.name)[:40]}-"
        bodies = (
            json.dumps(pod_body(name=f"{prefix}{index}", run=run, pod_labels=pod_labels)).encode()
            for index in range(pods)
        )
        started = time.monotonic()
        await _create_pods(
            api=api,
            url=f"{configuration.host}/api/v1/namespaces/{namespace}/pods",
            bodies=bodies,
            concurrency=run.create_concurrency,
        )
        created = time.monotonic()
        create_rate = pods / max(created - started, 1e-9)
        log.info("created %s pods in %.1f s (%.0f pods/s)", pods, created - started, create_rate)
        await watcher
        if len(scheduled_at) < pods:
            log.info("only %s of %s pods scheduled before the deadline", len(scheduled_at), pods)
        stats = throughput(started=started, scheduled_at=list(scheduled_at.values()))
    all_scheduled = len(scheduled_at) == pods
    details = {
        "nodes": node_count,
        "pods": pods,
        "scheduled pods": len(scheduled_at),
        "gpus per pod": run.gpus_per_pod,
        "scheduler": run.scheduler_name,
        "create rate (pods/s)": round(create_rate, 1),
        "time to all scheduled (seconds)": round(stats.seconds_to_all_scheduled, 3)
        if all_scheduled
        else None,
        "throughput average (pods/s)": round(stats.average, 1),
        "throughput p50 (pods/s)": stats.p50,
        "throughput p90 (pods/s)": stats.p90,
        "throughput p99 (pods/s)": stats.p99,
    }
    test = TestResult(test_name=TEST_NAME, status="success" if all_scheduled else "failure", details=details)
    return WorkloadResult(test=test, all_scheduled=all_scheduled)


def run_workload(
    *, scenario: Scenario, run: WorkloadRun, node_count: int, namespace: str, run_id: str
) -> WorkloadResult:
    """Create the scenario's pods in ``namespace`` and measure their scheduling.

    The pods stay: removing thousands can take minutes, so the caller uploads the measurement first
    and then calls ``remove_workload_pods``.
    """
    return asyncio.run(
        _run(scenario=scenario, run=run, node_count=node_count, namespace=namespace, run_id=run_id)
    )


def remove_workload_pods(*, scenario: Scenario, namespace: str, run_id: str) -> None:
    """Delete the scenario's workload pods and wait until they are gone (up to 300 s)."""
    selector = labels.selector(
        labels.object_labels(run_id=run_id, scenario=scenario.name, role=labels.WORKLOAD)
    )

    async def remove() -> None:
        async with client.ApiClient(await _configuration(4)) as api:
            await _delete_pods(client.CoreV1Api(api), namespace, selector)

    asyncio.run(remove())
