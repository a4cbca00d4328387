"""Pipeline overhead outside the runner pods, for the shipped scenarios.

Usage: ``.venv/bin/python benchmarks/pipeline_overhead.py [--node-count 500] [--scenarios a b]`` with
the local environment up (by default every enabled scenario, KAI's suite on the environment's KAI).
Runs the nightly DAG once with dag.test() and splits its wall time into the time the runners spent on
their scenarios (from each outcome.json) and everything else: setup, pod start-up, log streaming, the
summary and teardown. Prints a Markdown table. It publishes into a bucket of its own and an Airflow
home of its own, both removed at the end: the environment's history is untouched.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from localenv.demo import prepare_airflow
from localenv.environment import LocalEnvironment
from localenv.settings import Settings

REPO = Path(__file__).resolve().parents[1]


def _seconds(start: str, end: str) -> float:
    def parse(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    return (parse(end) - parse(start)).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--node-count", type=int, default=500)
    parser.add_argument(
        "--scenarios", nargs="+", default=[], help="the scenarios to run (default: enabled ones)"
    )
    options = parser.parse_args()
    environment = LocalEnvironment(Settings.from_environment())
    airflow_home = Path(tempfile.mkdtemp(prefix="airflow-bench-"))
    try:
        with environment.scratch_bucket() as bucket:
            prepare_airflow(environment, airflow_home=airflow_home)
            os.environ["KAI_SCALE_RESULTS_BUCKET"] = bucket
            _measure(options.node_count, options.scenarios)
    finally:
        shutil.rmtree(airflow_home, ignore_errors=True)


def _measure(node_count: int, scenarios: list[str]) -> None:
    sys.path[:0] = [str(REPO / "dags")]
    import kai_scale_nightly  # noqa: PLC0415 - after Airflow is configured

    started = time.monotonic()
    conf = {"node_count": node_count, **({"scenarios": scenarios} if scenarios else {})}
    dag_run = kai_scale_nightly.dag.test(run_conf=conf)
    wall = time.monotonic() - started
    summary = dag_run.get_task_instance("publish_results").xcom_pull(
        task_ids="publish_results", key="run_summary"
    )
    durations = {ti.task_id: ti.duration or 0.0 for ti in dag_run.get_task_instances()}
    in_runners = 0.0
    print(f"| {node_count} nodes, run {dag_run.state} | seconds |")
    print("|---|---|")
    for entry in summary["scenarios"]:
        outcome = entry["outcome"]
        if outcome:
            seconds = _seconds(outcome["started_at"], outcome["finished_at"])
            in_runners += seconds
            task = f"run_{entry['scenario'].replace('-', '_')}"
            label = f"{entry['scenario']} ({entry['status']}): runner / task"
            print(f"| {label} | {seconds:.0f} / {durations[task]:.1f} |")
    setup = sum(v for k, v in durations.items() if k.startswith("setup."))
    print(f"| setup tasks | {setup:.1f} |")
    closing = sum(durations[t] for t in ("collect_metrics", "publish_results", "tear_down_environment"))
    print(f"| metrics + publishing + teardown | {closing:.1f} |")
    print(f"| whole run (dag.test wall time) | {wall:.1f} |")
    print(f"| **overhead outside runner pods** | **{wall - in_runners:.1f}** |")


if __name__ == "__main__":
    main()
