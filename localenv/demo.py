"""``make demo``: run the nightly DAG once on the local environment and print what each scenario did.

Exits 1 when the run failed. Airflow's state (SQLite) lives under the local environment's home.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from localenv.environment import LocalEnvironment
from localenv.settings import DEFAULT_BUCKET, Settings

REPO = Path(__file__).resolve().parents[1]


def prepare_airflow(environment: LocalEnvironment) -> None:
    """Point Airflow at this repository and the local environment; must run before Airflow is imported."""
    home = environment.config.home / "airflow"
    os.environ.update(environment.exports())
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        }
    )
    airflow = Path(sys.executable).parent / "airflow"
    subprocess.run([str(airflow), "db", "migrate"], check=True, stdout=subprocess.DEVNULL)


def _duration(outcome: dict[str, Any] | None) -> str:
    if not outcome:
        return "-"
    started = datetime.fromisoformat(outcome["started_at"].replace("Z", "+00:00"))
    finished = datetime.fromisoformat(outcome["finished_at"].replace("Z", "+00:00"))
    return f"{(finished - started).total_seconds():.0f} s"


def _key_timings(outcome: dict[str, Any] | None) -> str:
    """The timing details of each test (durations, throughput), as the suite or the workload wrote them."""
    parts = []
    for test in (outcome or {}).get("tests") or []:
        for key, value in (test.get("details") or {}).items():
            if "time" in key.lower() or key.startswith("throughput average"):
                parts.append(f"{key.split(' (')[0]}: {value}")
    return ", ".join(parts) or "-"


def table(summary: dict[str, Any]) -> str:
    """The per-scenario table the demo prints."""
    rows = [("scenario", "status", "took", "key timings", "reason", "result")]
    for entry in summary["scenarios"]:
        where = f"s3://{DEFAULT_BUCKET}/{entry['result_key']}" if entry["result_key"] else "-"
        rows.append(
            (
                entry["scenario"],
                entry["status"],
                _duration(entry["outcome"]),
                _key_timings(entry["outcome"]),
                entry["reason"] or "-",
                where,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1]
        for row in rows
    )


def main() -> int:
    """Run the DAG once and report."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--node-count", type=int, default=int(os.environ.get("NODE_COUNT", "500")))
    options = parser.parse_args()
    environment = LocalEnvironment(Settings.from_environment())
    if not environment.is_up():
        print("the local environment is not running: start it with `make local-up`", file=sys.stderr)
        return 1
    prepare_airflow(environment)
    sys.path[:0] = [str(REPO / "plugins"), str(REPO / "dags")]
    import kai_scale_nightly  # noqa: PLC0415 - Airflow must be configured before it is imported

    dag_run = kai_scale_nightly.dag.test(run_conf={"node_count": options.node_count})
    summary = dag_run.get_task_instance("publish_results").xcom_pull(
        task_ids="publish_results", key="summary"
    )
    print()
    print(f"run {summary['run_id'] if summary else '?'} on {options.node_count} nodes: {dag_run.state}")
    if summary:
        print(table(summary))
        prefix = kai_scale_nightly.settings.results_prefix
        print(f"published: s3://{DEFAULT_BUCKET}/{prefix}{summary['run_id']}/{{results,report,metrics}}.json")
        print(f"manifest:  s3://{DEFAULT_BUCKET}/{prefix}manifest.json")
    else:
        print("no summary: the run failed before its scenarios (see the task logs above)")
    return 0 if dag_run.state == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
