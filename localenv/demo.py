"""``make demo``: run the nightly DAG once on the Airflow deployment and print what each scenario did.

Airflow runs as its users run it (localenv.airflow): the official chart in the local cluster, on the
local PostgreSQL, a worker pod per task, task logs in S3. The demo installs or upgrades the release
when its image or values changed, serves its UI on loopback, triggers the DAG through the REST API,
prints a line per task as it finishes, then the table of scenarios and where the trend view shows the
run. Exits 1 when the run failed. The UI stays up until ``make local-down``.

``make view`` (``--serve-view``) is that UI alone, with the plugin's "Scale tests".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from kai_scale_model.waiting import wait_for
from localenv.airflow import AirflowDeployment
from localenv.airflow_api import ADMIN_PASSWORD, ADMIN_USER, AirflowApi
from localenv.environment import LocalEnvironment
from localenv.processes import ComponentError
from localenv.settings import DEFAULT_BUCKET, Settings


def _duration(outcome: dict[str, Any] | None) -> str:
    if not outcome:
        return "-"
    started = datetime.fromisoformat(outcome["started_at"].replace("Z", "+00:00"))
    finished = datetime.fromisoformat(outcome["finished_at"].replace("Z", "+00:00"))
    return f"{(finished - started).total_seconds():.0f} s"


def _key_timings(outcome: dict[str, Any] | None) -> str:
    """The timing details of each test (durations, throughput), named by the test that measured them."""
    parts = []
    for test in (outcome or {}).get("tests") or []:
        for key, value in (test.get("details") or {}).items():
            if "time" in key.lower() or key.startswith("throughput average"):
                parts.append(f"{test['test_name']}: {key.split(' (')[0]} {value}")
    return "; ".join(parts) or "-"


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


def profiles_line(keys: Sequence[str], *, folder: str) -> str:
    """What the demo says of the run's profiles: each scenario's, from the keys under ``<folder>profiles/``.

    They sit at ``profiles/<scenario>/<type>.pb.gz`` of the run's published folder ``folder``.
    """
    published: dict[str, list[str]] = {}
    for key in keys:
        scenario, _, file = key.removeprefix(f"{folder}{PROFILES}").partition("/")
        if file.endswith(PPROF_SUFFIX):
            published.setdefault(scenario, []).append(file.removesuffix(PPROF_SUFFIX))
    if not published:
        return "profiles:  none published (the trend view's run page says why)"
    listed = "; ".join(f"{name}: {', '.join(sorted(types))}" for name, types in sorted(published.items()))
    return f"profiles:  {listed} (s3://{DEFAULT_BUCKET}/{folder}{PROFILES}, `go tool pprof` opens them)"


DAG_ID = "kai_scale_nightly"
DAG_FILE = "kai_scale_nightly.py"
# The trend view's page of a run in Airflow's UI: the plugin's nav route, then its app's own path
# (kai_scale.views.plugin; the demo does not import the pipeline).
VIEW_RUN_PATH = "/plugin/scale-tests/scale-tests/runs/"
# A run's profiles in its published folder: profiles/<scenario>/<type>.pb.gz (docs/results.md).
PROFILES, PPROF_SUFFIX = "profiles/", ".pb.gz"
FINISHED_TASK = ("success", "failed", "skipped", "upstream_failed", "removed")
FINISHED_RUN = ("success", "failed")
# The dag-processor parses the DAG file once its pod starts; a cold one imports the provider first.
PARSE_TIMEOUT_SECONDS = 300
POLL_SECONDS = 3
# Longer than a night at 500 nodes with every scenario.
FOLLOW_TIMEOUT_SECONDS = 8 * 3600


def run_conf(*, node_count: int, scenarios: list[str]) -> dict[str, Any]:
    """The run's params; without scenarios, the DAG's default (every enabled one)."""
    return {"node_count": node_count, **({"scenarios": scenarios} if scenarios else {})}


def import_failure(import_errors: dict[str, Any], *, since: datetime | None) -> str | None:
    """The error of the DAG file's last import (GET /importErrors), if it failed since ``since``.

    Its last line names the cause: ``ModuleNotFoundError: No module named 'kai_scale'`` for an image
    without the pipeline's provider, the setting it refused for a bad deployment setting.
    """
    for error in import_errors.get("import_errors", []):
        recorded = datetime.fromisoformat(error["timestamp"])
        if error["filename"] == DAG_FILE and (since is None or recorded >= since):
            lines = [line for line in error["stack_trace"].splitlines() if line.strip()]
            return f"{error['filename']}: {lines[-1].strip() if lines else 'no trace recorded'}"
    return None


def wait_for_dag(api: AirflowApi, *, since: datetime | None = None) -> None:
    """Until the api-server serves the DAG parsed since ``since`` (None: parsed at all).

    Raises at once when the DAG file's import failed since then, naming the cause; after
    ``PARSE_TIMEOUT_SECONDS``, naming what the api-server answered last.
    """

    def dag_answer() -> httpx.Response:
        # The file's path in the DAG bundle, matched exactly (the whole list may be long).
        failure = import_failure(api.get("/importErrors", params={"filename": DAG_FILE}), since=since)
        if failure:
            raise ComponentError(
                f"airflow: the DAG file does not import in the deployment: {failure}; the whole trace: "
                f"{api.base_url}/api/v2/importErrors?filename={DAG_FILE} (or the UI's DAG import errors)"
            )
        return api.request("GET", f"/dags/{DAG_ID}")

    def not_parsed(answer: httpx.Response) -> ComponentError:
        if answer.status_code == 200:
            said = f"last parsed at {answer.json().get('last_parsed_time')}, the upgrade ended at {since}"
        else:
            said = f"the api-server answered {answer.status_code} {answer.text[:200]}"
        return ComponentError(
            f"airflow: {DAG_ID} not parsed after {PARSE_TIMEOUT_SECONDS} s ({said}); "
            "see the dag-processor's log: kubectl -n airflow logs deployment/airflow-dag-processor"
        )

    wait_for(
        dag_answer,
        until=lambda answer: answer.status_code == 200 and _parsed_since(answer.json(), since),
        what=f"{DAG_ID} parsed",
        timeout=PARSE_TIMEOUT_SECONDS,
        interval=POLL_SECONDS,
        error=not_parsed,
    )


def _parsed_since(dag: dict[str, Any], since: datetime | None) -> bool:
    parsed = dag.get("last_parsed_time")
    fresh = since is None or (parsed is not None and datetime.fromisoformat(parsed) >= since)
    return fresh and not dag.get("has_import_errors", False)


def trigger(api: AirflowApi, conf: dict[str, Any]) -> str:
    """Unpause the DAG and start a run with ``conf``; its Airflow run id."""
    unpaused = api.request("PATCH", f"/dags/{DAG_ID}", json={"is_paused": False})
    if unpaused.status_code != 200:
        raise ComponentError(
            f"airflow: unpausing {DAG_ID} failed: {unpaused.status_code} {unpaused.text[:300]}"
        )
    answer = api.request("POST", f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": conf})
    if answer.status_code != 200:
        # A bad conf is refused with 400 naming the param: a bad value by Airflow's check of the params,
        # an unknown key by the plugin's trigger guard.
        raise ComponentError(f"airflow: the trigger was refused: {answer.status_code} {answer.text[:500]}")
    return str(answer.json()["dag_run_id"])


def run_path(run_id: str) -> str:
    """The REST path of a run of the DAG."""
    return f"/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}"


def task_instances(api: AirflowApi, run_id: str) -> list[dict[str, Any]]:
    """The run's task instances, as the REST API lists them."""
    listing = api.get(f"{run_path(run_id)}/taskInstances", params={"limit": 100})
    return list(listing["task_instances"])


def follow(api: AirflowApi, run_id: str, *, timeout_seconds: float = FOLLOW_TIMEOUT_SECONDS) -> str:
    """Print each task as it finishes, until the run does; the run's final state.

    Raises when it has not finished after ``timeout_seconds`` (a scheduler that never runs it).
    """
    printed: set[str] = set()

    def run_state() -> str:
        """The run's state, once the tasks that finished since the last look are printed."""
        state = str(api.get(run_path(run_id))["state"])
        for instance in sorted(task_instances(api, run_id), key=lambda ti: ti["end_date"] or ""):
            if instance["state"] in FINISHED_TASK and instance["task_id"] not in printed:
                printed.add(instance["task_id"])
                seconds = instance.get("duration")
                took = f" ({seconds:.0f} s)" if seconds is not None else ""
                print(f"  {instance['state']:<16} {instance['task_id']}{took}", flush=True)
        return state

    return wait_for(
        run_state,
        until=lambda state: state in FINISHED_RUN,
        what=f"run {run_id} finished",
        timeout=timeout_seconds,
        interval=POLL_SECONDS,
        error=lambda _: ComponentError(
            f"airflow: run {run_id} not finished after {timeout_seconds / 3600:.0f} h; see the "
            "scheduler's log: kubectl -n airflow logs deployment/airflow-scheduler"
        ),
    )


def run_summary(api: AirflowApi, run_id: str) -> dict[str, Any] | None:
    """The run summary the publishing task pushed to XCom, or None when it did not."""
    answer = api.request(
        "GET",
        f"{run_path(run_id)}/taskInstances/publish_results/xcomEntries/run_summary",
        params={"deserialize": True},
    )
    if answer.status_code != 200:
        return None
    value = answer.json()["value"]
    return dict(value if isinstance(value, dict) else json.loads(value))


def view_url(*, port: int, run_id: str) -> str:
    """The run's page in the trend view, inside Airflow's UI served on ``port``."""
    return f"http://localhost:{port}{VIEW_RUN_PATH}{quote(run_id, safe='')}"


def main() -> int:
    """Run the DAG once on the deployment and report, or only serve its UI (``--serve-view``)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--node-count", type=int, default=int(os.environ.get("NODE_COUNT", "100")))
    parser.add_argument(
        "--scenarios",
        default="",
        help="names of the scenarios to run, separated by spaces or commas (default: every enabled one)",
    )
    parser.add_argument("--view-port", type=int, default=8080, help="where Airflow's UI is served (loopback)")
    parser.add_argument(
        "--serve-view", action="store_true", help="serve Airflow's UI instead of running the DAG"
    )
    options = parser.parse_args()
    environment = LocalEnvironment(Settings.from_environment())
    if not environment.is_up():
        print("the local environment is not running: start it with `make local-up`", file=sys.stderr)
        return 1
    deployment = AirflowDeployment(environment)
    # An upgraded release must parse the DAG anew: what the api-server served before may be stale.
    since: datetime | None = None
    try:
        started = time.monotonic()
        if deployment.deploy():
            since = datetime.now(UTC)  # the release before is gone: only the new one parses from now on
            print(f"airflow: release ready in {time.monotonic() - started:.0f} s", flush=True)
        else:
            print("airflow: the release is up to date", flush=True)
        ui = deployment.serve_ui(options.view_port)
    except ComponentError as error:
        print(error, file=sys.stderr)
        return 1
    login = f"(log in as {ADMIN_USER} / {ADMIN_PASSWORD})"
    if options.serve_view:
        print(
            f"Airflow's UI with the trend view: {ui}/plugin/scale-tests {login}; `make local-down` stops it"
        )
        return 0
    api = AirflowApi(ui)
    try:
        wait_for_dag(api, since=since)
        conf = run_conf(node_count=options.node_count, scenarios=options.scenarios.replace(",", " ").split())
        airflow_run_id = trigger(api, conf)
        print(
            f"running {DAG_ID} with {json.dumps(conf)}: {ui}/dags/{DAG_ID}/runs/{quote(airflow_run_id)}",
            flush=True,
        )
        state = follow(api, airflow_run_id)
        summary = run_summary(api, airflow_run_id)
    except ComponentError as error:
        print(error, file=sys.stderr)
        return 1
    finally:
        api.close()
    print()
    print(f"run {summary['run_id'] if summary else '?'} on {options.node_count} nodes: {state}")
    if summary:
        print(table(summary))
        prefix = os.environ.get("KAI_SCALE_RESULTS_PREFIX", "Public/")
        folder = f"{prefix}{summary['run_id']}/"
        print(f"published: s3://{DEFAULT_BUCKET}/{folder}")
        print(profiles_line(bucket_keys(environment, f"{folder}{PROFILES}"), folder=folder))
        print(f"manifest:  s3://{DEFAULT_BUCKET}/{prefix}manifest.json")
        print(f"trend view: {view_url(port=options.view_port, run_id=summary['run_id'])} {login}")
    else:
        print(f"no run summary: the run failed before publishing; its task logs: {ui}/dags/{DAG_ID}")
    return 0 if state == "success" else 1


def bucket_keys(environment: LocalEnvironment, prefix: str) -> list[str]:
    """The keys under ``prefix`` in the local bucket."""
    pages = (
        environment.s3()
        .client()
        .get_paginator("list_objects_v2")
        .paginate(Bucket=DEFAULT_BUCKET, Prefix=prefix)
    )
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


if __name__ == "__main__":
    sys.exit(main())
