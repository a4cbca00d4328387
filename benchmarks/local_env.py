"""Benchmarks of the local environment: start, runner pod start, nodes Ready, memory.

Times a warm start, a runner pod from creation to Running on the real node, nodes Ready after the
NodePool is applied, and each process' memory.

Usage: ``make bench`` or ``.venv/bin/python benchmarks/local_env.py [--nodes 500 5000] [--cold-build]``.
Prints a Markdown table; docs/benchmarks.md keeps the figures with the command that produced them.
It stops a running local environment first (it measures a start) and leaves one running at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubernetes import client, config

from kai_scale.cluster.tasks import setup_step
from kai_scale.settings import DEFAULT_RUNNER_IMAGE, PipelineSettings
from localenv import exports
from localenv.environment import LocalEnvironment
from localenv.node_config import SYSTEM_NODE_LABEL, SYSTEM_NODE_TAINT
from localenv.processes import processes_under
from localenv.settings import Settings

REPO = Path(__file__).resolve().parents[1]
POOL_LABEL = "kwok.x-k8s.io/controller=managed-nodepool"


def cold_build_seconds() -> float:
    """Build every binary into an empty cache with an empty Go build cache (the module cache is kept)."""
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as gocache:
        env = {**os.environ, "KAI_LOCALENV_CACHE": cache, "GOCACHE": gocache}
        started = time.monotonic()
        subprocess.run([str(REPO / "localenv" / "build.sh")], env=env, check=True, stdout=subprocess.DEVNULL)
        return time.monotonic() - started


def warm_up_seconds(environment: LocalEnvironment) -> float:
    """Time ``up`` from nothing running, with the binaries already built."""
    environment.down()
    started = time.monotonic()
    environment.up(node_count=0)
    return time.monotonic() - started


def runner_pod_start_seconds(core: client.CoreV1Api, *, repeat: int = 5) -> list[float]:
    """Create a runner pod on the real node (image pulled, ``Always``) and time it until Running."""
    namespace = "kai-scale-bench"
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        while not core.list_namespaced_service_account(namespace).items:
            time.sleep(0.2)
        seconds = []
        for attempt in range(repeat):
            name = f"runner-start-{attempt}"
            pod = {
                "metadata": {"name": name},
                "spec": {
                    "nodeSelector": {SYSTEM_NODE_LABEL: "system"},
                    "tolerations": [{**SYSTEM_NODE_TAINT, "operator": "Equal"}],
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "runner",
                            "image": f"{DEFAULT_RUNNER_IMAGE}:main",
                            "imagePullPolicy": "Always",
                            "command": ["sleep", "600"],
                        }
                    ],
                },
            }
            started = time.monotonic()
            core.create_namespaced_pod(namespace, pod)
            while core.read_namespaced_pod(name, namespace).status.phase != "Running":
                if time.monotonic() - started > 120:
                    raise RuntimeError(f"runner pod {name} not Running after 120 s")
                time.sleep(0.05)
            seconds.append(time.monotonic() - started)
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        return seconds
    finally:
        core.delete_namespace(namespace)


def ready_nodes(core: client.CoreV1Api) -> int:
    """How many of managed-nodepool's nodes are Ready (raw JSON: thousands of nodes)."""
    response = core.list_node(label_selector=POOL_LABEL, _preload_content=False)
    count = 0
    for node in json.loads(response.data)["items"]:
        conditions = node.get("status", {}).get("conditions") or []
        count += any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return count


def install_kwok_and_kwok_operator(environment: LocalEnvironment) -> None:
    """Install KWOK and kwok-operator as a run's setup does: the pipeline's own steps.

    (KWOK's controller makes the pool's nodes Ready; a fresh environment has neither, as a real cluster.)
    """
    os.environ.update(exports.variables(environment))
    settings = PipelineSettings.from_environment(default_include_dir=REPO / "include")
    setup_step("install_kwok").run(settings=settings)
    setup_step("size_node_pool").run(settings=settings, params={"node_count": 0})


def seconds_until_ready(environment: LocalEnvironment, core: client.CoreV1Api, count: int) -> float:
    """Apply managed-nodepool with ``count`` nodes and time until all of them are Ready."""
    started = time.monotonic()
    environment.scale_node_pool(count)
    while ready_nodes(core) < count:
        if time.monotonic() - started > 900:
            raise RuntimeError(f"{count} nodes not Ready after 900 s")
        time.sleep(0.5)
    return time.monotonic() - started


def scale_to_zero(environment: LocalEnvironment, core: client.CoreV1Api) -> None:
    """Remove the pool's nodes and wait until they are gone."""
    environment.scale_node_pool(0)
    while core.list_node(label_selector=POOL_LABEL, limit=1).items:
        time.sleep(1)


def resident_memory_mib(environment: LocalEnvironment) -> dict[str, float]:
    """Resident memory of each process of the environment, by command name."""
    usage: dict[str, float] = {}
    for pid in processes_under(str(environment.config.home)):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        rss_kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        name = Path(argv[0].decode()).name
        if name.startswith("python"):
            name = next((a.decode() for a in argv if a.startswith(b"localenv.")), name)
        usage[name] = usage.get(name, 0.0) + rss_kib / 1024
    return usage


def main() -> None:
    """Run the benchmarks and print the results as Markdown."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--cold-build", action="store_true", help="also time a build from empty caches")
    options = parser.parse_args()
    rows: list[tuple[str, str]] = []
    if options.cold_build:
        rows.append(("cold build (empty GOCACHE and binary cache)", f"{cold_build_seconds():.0f} s"))
    environment = LocalEnvironment(Settings.from_environment())
    rows.append(("warm `local-up` (binaries cached)", f"{warm_up_seconds(environment):.1f} s"))
    configuration = client.Configuration()
    config.load_kube_config(str(environment.config.kubeconfig), client_configuration=configuration)
    core = client.CoreV1Api(client.ApiClient(configuration))
    starts = sorted(runner_pod_start_seconds(core))
    rows.append(
        (
            "runner pod from creation to Running on kai-system (pull Always), 5 pods",
            f"median {starts[len(starts) // 2]:.1f} s, max {starts[-1]:.1f} s",
        )
    )
    install_kwok_and_kwok_operator(environment)
    for count in options.nodes:
        rows.append(
            (
                f"{count} nodes Ready after the NodePool is applied",
                f"{seconds_until_ready(environment, core, count):.1f} s",
            )
        )
        if count == max(options.nodes):
            memory = resident_memory_mib(environment)
            for name, mib in sorted(memory.items(), key=lambda item: -item[1]):
                rows.append((f"RSS at {count} nodes: {name}", f"{mib:.0f} MiB"))
            rows.append((f"RSS at {count} nodes: total", f"{sum(memory.values()):.0f} MiB"))
        scale_to_zero(environment, core)
    print(f"| measure ({os.cpu_count()} cores, `{' '.join(sys.argv)}`) | result |")
    print("|---|---|")
    for measure, result in rows:
        print(f"| {measure} | {result} |")


if __name__ == "__main__":
    main()
