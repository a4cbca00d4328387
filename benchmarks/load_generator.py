"""Workload load generator: pods created per second against the local environment.

Usage: ``.venv/bin/python benchmarks/load_generator.py [--nodes 500] [--pods-per-node 4 8]`` with the
local environment up (``make local-up``) and the fake GPU operator installed in it (any run's setup
installs it: ``make demo``), which gives the nodes their GPUs. Runs the workload runner in this process
(not in a pod) with the admin kubeconfig, and prints the create rate and the scheduling figures it
measured.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import timedelta

from kai_scale_model.scenario import Scenario, WorkloadRun
from kai_scale_runner.workload import run_workload
from localenv.environment import LocalEnvironment
from localenv.settings import Settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods-per-node", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32])
    parser.add_argument(
        "--scheduler-name",
        default="default-scheduler",
        help="a name no scheduler serves (e.g. none) measures creation alone: pods stay Pending",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=1200,
        help="scenario timeout in seconds; the binding watch ends 120 s before it (at least 30 s after "
        "the start), so use e.g. 150 with --scheduler-name none",
    )
    options = parser.parse_args()
    environment = LocalEnvironment(Settings.from_environment())
    os.environ["KUBECONFIG"] = str(environment.config.kubeconfig)
    environment.scale_node_pool(options.nodes)
    print(
        f"| pods ({options.nodes} nodes) | concurrency | created/s | scheduled/s avg | p50 | p99 "
        "| all scheduled |"
    )
    print("|---|---|---|---|---|---|---|")
    for per_node in options.pods_per_node:
        for concurrency in options.concurrency:
            run = WorkloadRun(
                kind="workload",
                pods_per_node=per_node,
                create_concurrency=concurrency,
                scheduler_name=options.scheduler_name,
            )
            scenario = Scenario(
                name="bench-load",
                description="benchmark",
                run=run,
                timeout=timedelta(seconds=options.timeout),
            )
            started = time.monotonic()
            result = run_workload(
                scenario=scenario, run=run, node_count=options.nodes, namespace="default", run_id="bench"
            )
            details = result.test.details or {}
            print(
                f"| {details['pods']} | {concurrency} | {details['create rate (pods/s)']} "
                f"| {details['throughput average (pods/s)']} | {details['throughput p50 (pods/s)']} "
                f"| {details['throughput p99 (pods/s)']} | {details['time to all scheduled (seconds)']} s |"
            )
            print(f"<!-- run took {time.monotonic() - started:.0f} s -->")


if __name__ == "__main__":
    main()
