"""The trend view's pages with a long history: how long the Runs page takes with 10,000 runs.

Usage: ``.venv/bin/python benchmarks/trend_view.py [--history 10000] [--repeat 5]`` with the local
environment up (its S3 endpoint), or ``--s3-endpoint http://127.0.0.1:<port>`` for another one (a
``python -m localenv.s3_server --port <port>`` of your own). Seeds, in a bucket of its own (created
here, deleted with its objects at the end), a manifest of ``--history`` nightly runs at three node
counts, 5 % of them failed (their entries naming the failed scenario, as publishing writes them), with
the results.json of every failed run and the results.json and verdicts.json of the last 90 days at 500
nodes; then times the view's requests through its FastAPI app in this process, reading the bucket over
HTTP as the api-server does. Airflow's authorization is left out: it is one JWT check and one database
query per request, whatever the history. Times are medians; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

NODE_COUNTS = (500, 100, 1000)
FAILED_EVERY = 20
FILL = "Fill Cluster with single GPU Jobs"


def _timestamp(index: int, history: int) -> datetime:
    # One run per night at each node count, the newest last night.
    days_back = (history - 1 - index) // len(NODE_COUNTS) + 1
    return (datetime.now(UTC) - timedelta(days=days_back)).replace(hour=2, minute=0, second=0, microsecond=0)


def _entry(prefix: str, index: int, history: int) -> dict[str, Any]:
    run_id = f"{_timestamp(index, history):%Y%m%dT%H%M%SZ}-scheduled-{index:08x}"
    failed = index % FAILED_EVERY == 7
    return {
        "timestamp": f"{_timestamp(index, history):%Y-%m-%dT%H:%M:%SZ}",
        "path": f"{prefix}{run_id}/results.json",
        "commit": f"{index:040x}",
        "run_id": run_id,
        "airflow_run_id": f"scheduled__{_timestamp(index, history).isoformat()}",
        "node_count": NODE_COUNTS[index % len(NODE_COUNTS)],
        "kai_ref": "v0.9.0",
        "status": "failure" if failed else "success",
        "verdict": "failure" if failed else "pass",
        "failed_scenarios": ["reclaim"] if failed else [],
    }


def _results(index: int, failed: bool) -> dict[str, Any]:
    tests = [
        {
            "test_name": FILL,
            "status": "success",
            "details": {"nodes": 500, "jobs": 4000, "time": f"6m{index % 9}s"},
        },
        {
            "test_name": "GPU pod scheduling throughput",
            "status": "success",
            "details": {
                "pods": 2000,
                "create rate (pods/s)": 480.0 + index % 7,
                "time to all scheduled (seconds)": 18.0 + index % 5,
                "throughput average (pods/s)": 110.0 + index % 3,
                "throughput p50 (pods/s)": 104.0 + index % 4,
                "throughput p90 (pods/s)": 125.0 + index % 6,
                "throughput p99 (pods/s)": 131.0 + index % 2,
            },
        },
    ]
    if failed:
        tests.append(
            {"test_name": "reclaim", "status": "failure", "details": {"scenario": "reclaim", "message": "x"}}
        )
    return {"metadata": {}, "results": {"status": "failure" if failed else "success", "tests": tests}}


def _verdicts(run_id: str) -> dict[str, Any]:
    threshold = {"min": None, "max": 420.0, "status": "pass", "reason": "within bounds"}
    return {
        "run_id": run_id,
        "verdict": "pass",
        "reasons": [],
        "tests": {FILL: {"time": {"threshold": threshold}}},
    }


def _seed(store: Any, prefix: str, history: int) -> dict[str, Any]:
    """Write the manifest and the documents the pages read; the manifest's size and counts."""
    from kai_scale.publishing.manifest import manifest_text  # noqa: PLC0415 - after the environment is set

    entries = [_entry(prefix, index, history) for index in range(history)]
    recent = _timestamp(history - 1, history) - timedelta(days=90)
    seeded = 0
    for index, entry in enumerate(entries):
        failed = entry["status"] == "failure"
        in_trends = entry["node_count"] == NODE_COUNTS[0] and _timestamp(index, history) > recent
        if failed or in_trends:
            store.write_text(key=entry["path"], text=json.dumps(_results(index, failed)))
            seeded += 1
        if in_trends:
            store.write_text(
                key=entry["path"].replace("results.json", "verdicts.json"),
                text=json.dumps(_verdicts(entry["run_id"])),
            )
            seeded += 1
    text = manifest_text({"runs": entries})
    store.write_text(key=f"{prefix}manifest.json", text=text)
    return {
        "manifest_mb": len(text) / 2**20,
        "objects": seeded,
        "failed": sum(e["status"] == "failure" for e in entries),
    }


def _median_seconds(call: Callable[[], object], *, before: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        before()
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _measure(store: Any, options: argparse.Namespace) -> None:
    with warnings.catch_warnings():
        # Starlette's test client warns about httpx on import (third-party, not ours).
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient  # noqa: PLC0415

    from kai_scale.views.app import create_app  # noqa: PLC0415
    from kai_scale.views.reader import ResultsReader  # noqa: PLC0415

    prefix = "Public/"
    seeded = _seed(store, prefix, options.history)

    def view(*, manifest_max_age: float = 30.0) -> TestClient:
        reader = ResultsReader(store=store, prefix=prefix, manifest_max_age=manifest_max_age)
        return TestClient(create_app(reader=reader, dag_id="kai_scale_nightly", authorization=lambda: None))

    def page(web: Callable[[], TestClient], path: str, **params: Any) -> Callable[[], object]:
        def get() -> None:
            answer = web().get(path, params=params)
            if answer.status_code != 200:
                raise SystemExit(f"GET {path} answered {answer.status_code}: {answer.text[:500]}")

        return get

    # "first request": a new view (nothing read yet) before each timing; "cached": the same view,
    # asked once before each timing; "checked again": its manifest is re-checked on every request.
    cached, checked_again, fresh = view(), view(manifest_max_age=0), [view()]

    def renew() -> None:
        fresh[0] = view()

    def first(path: str, **params: Any) -> tuple[Callable[[], object], Callable[[], object]]:
        return page(lambda: fresh[0], path, **params), renew

    def warm(web: TestClient, path: str, **params: Any) -> tuple[Callable[[], object], Callable[[], object]]:
        get = page(lambda: web, path, **params)
        return get, get

    chart = {"node_count": NODE_COUNTS[0], "days": 90, "test": FILL, "detail": "time"}
    cases = {
        "Runs page, first request (manifest read and parsed)": first("/runs"),
        "Runs page, cached": warm(cached, "/runs"),
        "Runs page, manifest checked again (unchanged: 304)": warm(checked_again, "/runs"),
        "Runs page, filtered on outcome failure, cached": warm(cached, "/runs", outcome="failure"),
        "Runs page, page 50 (an older page), cached": warm(cached, "/runs", page=50),
        "Runs page, text filter on a failed scenario, first request": first("/runs", q="reclaim"),
        "Runs page, text filter on a failed scenario, cached": warm(cached, "/runs", q="reclaim"),
        "Trends page, 90 days at 500 nodes, first request": first("/trends", node_count=500, days=90),
        "Trends page, 90 days at 500 nodes, cached": warm(cached, "/trends", node_count=500, days=90),
        "one chart's data (90 runs), cached": warm(cached, "/api/trend", **chart),
    }
    print(
        f"| request ({options.history:,}-run manifest, {seeded['manifest_mb']:.1f} MB, "
        f"{seeded['failed']} failed runs) | time (median of {options.repeat}) |"
    )
    print("|---|---|")
    for name, (call, before) in cases.items():
        print(f"| {name} | {_median_seconds(call, before=before, repeat=options.repeat):.3f} s |")
    print(f"\nseeded {seeded['objects']} documents besides the manifest")


@contextmanager
def _bucket_at(endpoint: str) -> Iterator[str]:
    """A bucket of its own at ``endpoint``, reached through the Airflow connection as the view reaches it."""
    import boto3  # noqa: PLC0415

    from localenv.s3 import scratch_bucket  # noqa: PLC0415

    credentials = {"aws_access_key_id": "test", "aws_secret_access_key": "test", "region_name": "us-east-1"}
    os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = json.dumps(
        {
            "conn_type": "aws",
            "login": "test",
            "password": "test",
            "extra": {"endpoint_url": endpoint, "region_name": "us-east-1"},
        }
    )
    with scratch_bucket(boto3.client("s3", endpoint_url=endpoint, **credentials)) as bucket:
        yield bucket


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--history", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--s3-endpoint", help="an S3 endpoint of your own instead of the local environment's")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="airflow-bench-") as airflow_home:
        os.environ.setdefault("AIRFLOW_HOME", airflow_home)
        bucket: AbstractContextManager[str]
        if options.s3_endpoint:
            bucket = _bucket_at(options.s3_endpoint)
        else:
            from localenv import exports  # noqa: PLC0415 - after argparse, for a fast --help
            from localenv.environment import LocalEnvironment  # noqa: PLC0415
            from localenv.settings import Settings  # noqa: PLC0415

            environment = LocalEnvironment(Settings.from_environment())
            if not environment.is_up():
                raise SystemExit("the local environment is not running: start it with `make local-up`")
            os.environ.update(exports.variables(environment))
            bucket = environment.s3().scratch_bucket()
        from kai_scale.hooks.results_bucket import ResultsBucketHook  # noqa: PLC0415 - reads the env above

        with bucket as name:
            _measure(ResultsBucketHook(aws_conn_id="aws_default", bucket=name), options)


if __name__ == "__main__":
    main()
