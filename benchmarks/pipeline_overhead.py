"""Pipeline overhead outside the runner pods, worker pod start-up and Airflow's memory, on the deployment.

Usage: ``.venv/bin/python benchmarks/pipeline_overhead.py [--node-count 500] [--scenarios a b]`` with
the local environment up (by default every enabled scenario, KAI's suite on the environment's KAI),
or ``--run-id <Airflow run id>`` to read a finished run of the deployment instead of starting one.
Runs the nightly DAG once on the chart-deployed Airflow (localenv.airflow, as ``make demo`` deploys
it) through its REST API and reports:

- the run's wall time split into the time the runners spent on their scenarios (from each
  outcome.json) and everything else: setup, worker and runner pod start-up, the summary, teardown and
  the scheduling gaps between tasks — and a workload's removal of its pods, which its runner does after
  uploading its measurement; the time outside the scenario tasks is a lower bound on that overhead;
- each task's worker pod from queued to running its code (the task instance's ``queued_when`` to its
  ``start_date``): median and maximum over the run;
- the memory of Airflow's pods in the cluster (its namespace's containers, working set, from the
  monitoring stack's Prometheus, which scrapes the kubelet's cAdvisor): its peak during the run.

It publishes into a bucket of its own (task logs included), removed at the end: the environment's
history is untouched. The release is upgraded to point at that bucket, and back by the next deploy.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime
from typing import Any

import httpx

from kai_scale.operators.scenario_pod import ScenarioPodOperator, scenario_task_id
from localenv import exports
from localenv.airflow import AirflowDeployment
from localenv.airflow_api import AirflowApi
from localenv.airflow_values import NAMESPACE, Overrides
from localenv.demo import follow, run_path, run_summary, task_instances, trigger, wait_for_dag
from localenv.environment import LocalEnvironment
from localenv.settings import Settings


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _seconds(start: str, end: str) -> float:
    return (_time(end) - _time(start)).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--node-count", type=int, default=500)
    parser.add_argument(
        "--scenarios", nargs="+", default=[], help="the scenarios to run (default: enabled ones)"
    )
    parser.add_argument("--run-id", help="a finished run of the deployment to read, instead of starting one")
    options = parser.parse_args()
    environment = LocalEnvironment(Settings.from_environment())
    deployment = AirflowDeployment(environment)
    if options.run_id:
        with deployment.served_api() as api:
            _report(environment, api, options.run_id)
        return
    with environment.s3().scratch_bucket() as bucket:
        upgraded = deployment.deploy(
            Overrides(
                env={"KAI_SCALE_RESULTS_BUCKET": bucket},
                config={"logging": {"remote_base_log_folder": f"s3://{bucket}/airflow-logs"}},
            )
        )
        # After an upgrade, only the DAG the new release parsed is triggered.
        since = datetime.now(UTC) if upgraded else None
        with deployment.served_api() as api:
            _measure(environment, api, options.node_count, options.scenarios, since=since)


def _measure(
    environment: LocalEnvironment,
    api: AirflowApi,
    node_count: int,
    scenarios: list[str],
    *,
    since: datetime | None,
) -> None:
    wait_for_dag(api, since=since)
    conf = {"node_count": node_count, **({"scenarios": scenarios} if scenarios else {})}
    run_id = trigger(api, conf)
    follow(api, run_id)
    _report(environment, api, run_id)


def _report(environment: LocalEnvironment, api: AirflowApi, run_id: str) -> None:
    run = api.get(run_path(run_id))
    state, node_count = run["state"], (run.get("conf") or {}).get("node_count", "?")
    wall = _seconds(run["start_date"], run["end_date"])
    summary = run_summary(api, run_id) or {"scenarios": []}
    instances = {ti["task_id"]: ti for ti in task_instances(api, run_id)}
    durations = {task: ti["duration"] or 0.0 for task, ti in instances.items()}
    in_runners = 0.0
    outcomes: dict[str, dict[str, Any]] = {}
    print(f"| {node_count} nodes, run {state} | seconds |")
    print("|---|---|")
    for entry in summary["scenarios"]:
        outcome = entry["outcome"]
        if outcome:
            seconds = _seconds(outcome["started_at"], outcome["finished_at"])
            in_runners += seconds
            task = scenario_task_id(entry["scenario"])
            outcomes[task] = outcome
            label = f"{entry['scenario']} ({entry['status']}): runner / task"
            print(f"| {label} | {seconds:.0f} / {durations[task]:.1f} |")
    setup = sum(v for k, v in durations.items() if k.startswith("setup."))
    print(f"| setup tasks | {setup:.1f} |")
    closing = sum(
        durations.get(t, 0.0) for t in ("collect_metrics", "publish_results", "tear_down_environment")
    )
    print(f"| metrics + publishing + teardown | {closing:.1f} |")
    print(f"| whole run (the DAG run's start to end) | {wall:.1f} |")
    print(f"| **overhead outside runner pods** | **{wall - in_runners:.1f}** |")
    # A lower bound on the overhead: a scenario task also holds the operator's own work and its runner
    # pod's start.
    outside_scenario_tasks = wall - _scenario_tasks_seconds(api, run_id, instances, outcomes)
    print(f"| overhead outside the scenario tasks (a lower bound) | {outside_scenario_tasks:.1f} |")
    waits = [
        _seconds(ti["queued_when"], ti["start_date"])
        for ti in instances.values()
        if ti.get("queued_when") and ti.get("start_date")
    ]
    if waits:
        spread = f"median {statistics.median(waits):.1f}, max {max(waits):.1f}"
        print(f"| worker pod from queued to running, {len(waits)} tasks | {spread} |")
    print(f"| Airflow's pods' memory, peak during the run | {_airflow_memory(environment, run)} |")


def _scenario_tasks_seconds(
    api: AirflowApi, run_id: str, instances: dict[str, dict[str, Any]], outcomes: dict[str, dict[str, Any]]
) -> float:
    """The time the scenario tasks held, with or without an outcome (they run one at a time).

    Each task's tries (a lost worker's included) and its runner's measurement, which goes on between a
    lost worker's try and the retry that reattaches to it: the union of their spans.
    """
    total = 0.0
    for task, instance in instances.items():
        if instance["operator"] != ScenarioPodOperator.__name__:
            continue
        tries = api.get(f"{run_path(run_id)}/taskInstances/{task}/tries")["task_instances"]
        spans = [(ti["start_date"], ti["end_date"]) for ti in tries if ti["start_date"] and ti["end_date"]]
        if outcome := outcomes.get(task):
            spans.append((outcome["started_at"], outcome["finished_at"]))
        total += _covered_seconds(spans)
    return total


def _covered_seconds(spans: list[tuple[str, str]]) -> float:
    """The length of the union of time spans (ISO 8601 start and end)."""
    covered, reached = 0.0, None
    for start, end in sorted((_time(start), _time(end)) for start, end in spans):
        begin = start if reached is None else max(start, reached)
        if end > begin:
            covered += (end - begin).total_seconds()
            reached = end
    return covered


def _airflow_memory(environment: LocalEnvironment, run: dict[str, Any]) -> str:
    """The peak working set of the Airflow namespace's containers between the run's start and end."""
    prometheus = exports.monitoring_prometheus_url(environment)
    start, end = _time(run["start_date"]).timestamp(), _time(run["end_date"]).timestamp()
    query = (
        f'max_over_time(sum(container_memory_working_set_bytes{{namespace="{NAMESPACE}",container!=""}})'
        f"[{max(60, int(end - start))}s:15s])"
    )
    time.sleep(20)  # one more scrape after the run's end
    try:
        answer = httpx.get(f"{prometheus}/api/v1/query", params={"query": query, "time": end}, timeout=30)
        result = answer.json()["data"]["result"]
    except (httpx.HTTPError, KeyError, ValueError) as error:
        return f"not measured: {error}"
    if not result:
        return "not measured: no cAdvisor series for the namespace"
    return f"{float(result[0]['value'][1]) / 2**20:.0f} MiB"


if __name__ == "__main__":
    main()
