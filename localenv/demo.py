"""``make demo``: run the nightly DAG once on the local environment and print what each scenario did.

The run is ``airflow dags test`` in a child process whose whole log goes to a file (its path is
printed first); this process prints a line per task as it finishes, read from Airflow's metadata
database, then the table of scenarios and where the trend view shows the run. Exits 1 when the run
failed. Airflow's state (SQLite) lives under the local environment's home.

``make view`` (``--serve-view``) serves Airflow's UI on that state, with the plugin's "Scale tests".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from localenv.environment import LocalEnvironment
from localenv.settings import DEFAULT_BUCKET, Settings

REPO = Path(__file__).resolve().parents[1]


def prepare_airflow(environment: LocalEnvironment, *, airflow_home: Path | None = None) -> None:
    """Point Airflow at this repository and the local environment; must run before Airflow is imported.

    :param airflow_home: Airflow's home (its SQLite database); by default under the environment's home.
    """
    home = airflow_home or environment.config.home / "airflow"
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
    migrated = subprocess.run([str(airflow), "db", "migrate"], capture_output=True, text=True, check=False)
    if migrated.returncode != 0:
        raise SystemExit(f"airflow db migrate failed (AIRFLOW_HOME={home}):\n{migrated.stderr[-3000:]}")


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
    rows = [("scenario", "status", "took", "key timings", "reason", "outcome")]
    for entry in summary["scenarios"]:
        where = f"s3://{DEFAULT_BUCKET}/{entry['outcome_key']}" if entry["outcome_key"] else "-"
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


DAG_ID = "kai_scale_nightly"
# The trend view's page of a run in Airflow's UI: the plugin's nav route, then its app's own path
# (kai_scale.views.plugin; the demo does not import the pipeline).
VIEW_RUN_PATH = "/plugin/scale-tests/scale-tests/runs/"
FINISHED = ("success", "failed", "skipped", "upstream_failed", "removed")


def _dag_run_after(started: datetime) -> Any:
    """The DAG's newest run created since ``started``, or None yet."""
    from airflow.models.dagrun import DagRun  # noqa: PLC0415 - Airflow is configured by then
    from airflow.utils.session import create_session  # noqa: PLC0415

    with create_session() as session:
        return (
            session.query(DagRun)
            .filter(DagRun.dag_id == DAG_ID, DagRun.start_date >= started)
            .order_by(DagRun.start_date.desc())
            .first()
        )


def _finished_tasks(run_id: str) -> list[tuple[str, str, float | None]]:
    """(task id, state, seconds) of the run's finished task instances."""
    from airflow.models.taskinstance import TaskInstance  # noqa: PLC0415
    from airflow.utils.session import create_session  # noqa: PLC0415

    with create_session() as session:
        instances = session.query(TaskInstance).filter(
            TaskInstance.dag_id == DAG_ID, TaskInstance.run_id == run_id
        )
        return [(ti.task_id, str(ti.state), ti.duration) for ti in instances if ti.state in FINISHED]


def _run_summary(run_id: str) -> dict[str, Any] | None:
    """The run summary the publishing task pushed to XCom."""
    from airflow.models.xcom import XComModel  # noqa: PLC0415
    from airflow.utils.session import create_session  # noqa: PLC0415

    with create_session() as session:
        row = session.execute(
            XComModel.get_many(run_id=run_id, dag_ids=DAG_ID, task_ids="publish_results", key="run_summary")
        ).first()
        return XComModel.deserialize_value(row[0]) if row else None


def run_conf(*, node_count: int, scenarios: list[str]) -> dict[str, Any]:
    """The run's params; without scenarios, the DAG's default (every enabled one)."""
    return {"node_count": node_count, **({"scenarios": scenarios} if scenarios else {})}


def run_and_follow(*, conf: dict[str, Any], log_path: Path) -> tuple[str, str | None]:
    """Run the DAG in a child process, printing each task as it finishes; (state, Airflow run id)."""
    started = datetime.now(UTC)
    airflow = Path(sys.executable).parent / "airflow"
    printed: set[str] = set()
    run = None
    with log_path.open("w") as log:
        child = subprocess.Popen(
            [str(airflow), "dags", "test", DAG_ID, "--conf", json.dumps(conf)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            while True:
                done = child.poll() is not None
                run = run or _dag_run_after(started)
                if run is not None:
                    for task_id, state, seconds in sorted(_finished_tasks(run.run_id)):
                        if task_id not in printed:
                            printed.add(task_id)
                            took = f" ({seconds:.0f} s)" if seconds is not None else ""
                            print(f"  {state:<16} {task_id}{took}", flush=True)
                if done:
                    break
                time.sleep(2)
        finally:
            # Ctrl-C or an error while following: the run does not go on unwatched.
            if child.poll() is None:
                child.terminate()
                child.wait(timeout=60)
    if run is None:
        return "failed", None
    final = _dag_run_after(started)
    return (str(final.state) if final else "failed"), run.run_id


def view_url(*, port: int, run_id: str) -> str:
    """The run's page in the trend view, inside Airflow's UI served on ``port``."""
    return f"http://localhost:{port}{VIEW_RUN_PATH}{quote(run_id, safe='')}"


def api_server_answers(port: int) -> bool:
    """Whether an Airflow api-server answers on ``port``."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def serve_view(port: int) -> int:
    """Airflow's UI on the demo's metadata database and the local bucket, until interrupted.

    Everyone is an admin without a login (Airflow's simple auth manager): it listens on loopback only.
    """
    airflow = Path(sys.executable).parent / "airflow"
    os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] = "True"
    print(
        f"Airflow's UI with the trend view: http://localhost:{port}/plugin/scale-tests (Ctrl-C stops it)",
        flush=True,
    )
    try:
        return subprocess.run(
            [str(airflow), "api-server", "--host", "127.0.0.1", "--port", str(port)], check=False
        ).returncode
    except KeyboardInterrupt:
        return 0


def main() -> int:
    """Run the DAG once and report, or serve the UI (``--serve-view``)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--node-count", type=int, default=int(os.environ.get("NODE_COUNT", "100")))
    parser.add_argument(
        "--scenarios",
        default="",
        help="names of the scenarios to run, separated by spaces or commas (default: every enabled one)",
    )
    parser.add_argument("--view-port", type=int, default=8080, help="where `make view` serves Airflow's UI")
    parser.add_argument(
        "--serve-view", action="store_true", help="serve Airflow's UI instead of running the DAG"
    )
    options = parser.parse_args()
    environment = LocalEnvironment(Settings.from_environment())
    if not environment.is_up():
        print("the local environment is not running: start it with `make local-up`", file=sys.stderr)
        return 1
    prepare_airflow(environment)
    if options.serve_view:
        return serve_view(options.view_port)
    log_path = environment.config.home / "demo.log"
    conf = run_conf(node_count=options.node_count, scenarios=options.scenarios.replace(",", " ").split())
    print(f"running {DAG_ID} with {json.dumps(conf)}; Airflow's full log: {log_path}", flush=True)
    state, airflow_run_id = run_and_follow(conf=conf, log_path=log_path)
    summary = _run_summary(airflow_run_id) if airflow_run_id else None
    print()
    print(f"run {summary['run_id'] if summary else '?'} on {options.node_count} nodes: {state}")
    if summary:
        print(table(summary))
        prefix = os.environ.get("KAI_SCALE_RESULTS_PREFIX", "Public/")
        print(f"published: s3://{DEFAULT_BUCKET}/{prefix}{summary['run_id']}/")
        print(f"manifest:  s3://{DEFAULT_BUCKET}/{prefix}manifest.json")
        url = view_url(port=options.view_port, run_id=summary["run_id"])
        if api_server_answers(options.view_port):
            print(f"trend view: {url}")
        else:
            print(f"trend view: {url} (start Airflow's UI first: `make view`, port {options.view_port})")
    else:
        print(f"no run summary: the run failed before publishing (see {log_path})")
    return 0 if state == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
