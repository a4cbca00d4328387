"""Publishing time and peak memory with a long manifest history.

Usage: ``.venv/bin/python benchmarks/publish.py [--history 10000] [--repeat 5] [--report-mb 20]`` with the
local environment up (its S3 endpoint). Seeds a manifest of ``--history`` runs under a prefix of its
own in a bucket of its own (created here and deleted with its objects at the end), then times, for a
new run each time: the manifest append alone; a whole publish (results.json,
a realistic metrics.json, a small report, the manifest entry); and a whole publish with a large Ginkgo
report. Times are medians; peak memory is the peak of Python allocations (tracemalloc) during one
more call, made apart because tracemalloc slows the JSON work. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _entry(prefix: str, index: int) -> dict[str, Any]:
    run_id = f"2026{index:08d}-scheduled-{index:08x}"
    return {
        "timestamp": "2026-11-22T02:00:00Z",
        "path": f"{prefix}{run_id}/results.json",
        "commit": "0123456789abcdef0123456789abcdef01234567",
        "run_id": run_id,
        "airflow_run_id": f"scheduled__{index}",
        "node_count": 500,
        "kai_ref": "v0.9.0",
        "status": "success",
    }


def _metrics(run_id: str) -> str:
    """6 scenarios x 15 queries x 3 series x 240 points (an hour at 15 s): about what a night collects."""
    series = [
        {"labels": {"verb": str(i)}, "values": [[1.7e9 + 15 * t, 0.5 * t] for t in range(240)]}
        for i in range(3)
    ]
    query = {"status": "ok", "series": series}
    scenario = {"status": "collected", "metrics": {f"q{i}": query for i in range(15)}}
    return json.dumps({"run_id": run_id, "scenarios": {f"s{i}": scenario for i in range(6)}})


def _seconds(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _peak_mib(call: Callable[[], object]) -> float:
    # A separate call: tracemalloc slows allocation-heavy code (JSON) several times over.
    tracemalloc.start()
    call()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--history", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--report-mb", type=int, default=20)
    options = parser.parse_args()

    from localenv import exports  # noqa: PLC0415 - after argparse, for a fast --help
    from localenv.environment import LocalEnvironment  # noqa: PLC0415
    from localenv.settings import Settings  # noqa: PLC0415

    environment = LocalEnvironment(Settings.from_environment())
    if not environment.is_up():
        raise SystemExit("the local environment is not running: start it with `make local-up`")
    with tempfile.TemporaryDirectory(prefix="airflow-bench-") as airflow_home:
        os.environ.setdefault("AIRFLOW_HOME", airflow_home)
        os.environ.update(exports.variables(environment))
        from kai_scale.hooks.results_bucket import ResultsBucketHook  # noqa: PLC0415 - reads the env above

        with environment.s3().scratch_bucket() as bucket:
            _measure(ResultsBucketHook(aws_conn_id="aws_default", bucket=bucket), options)


def _measure(store: Any, options: argparse.Namespace) -> None:
    from kai_scale.object_keys import manifest_key  # noqa: PLC0415
    from kai_scale.publishing.manifest import manifest_text  # noqa: PLC0415
    from kai_scale.publishing.publisher import append_to_manifest, publish_run  # noqa: PLC0415

    prefix = "Public/"
    history = {"runs": [_entry(prefix, i) for i in range(options.history)]}
    store.write_text(key=manifest_key(prefix), text=manifest_text(history))
    suite = {"SuitePath": "/suite", "SpecReports": [{"LeafNodeText": "x" * 1000, "State": "passed"}]}
    small_report = json.dumps([suite])
    large_report = json.dumps([{**suite, "SpecReports": suite["SpecReports"] * (options.report_mb * 1000)}])
    store.write_text(key=f"{prefix}in/small.json", text=small_report)
    store.write_text(key=f"{prefix}in/large.json", text=large_report)
    results = {"metadata": {}, "results": {"status": "success", "tests": []}}
    counter = iter(range(options.history, options.history + 100 * options.repeat))

    def publish(ginkgo_report_key: str) -> Callable[[], object]:
        index = next(counter)
        entry = _entry(prefix, index)
        return lambda: publish_run(
            store,
            prefix=prefix,
            run_id=entry["run_id"],
            results=results,
            metrics_text=_metrics(entry["run_id"]),
            verdicts={"run_id": entry["run_id"], "verdict": "pass", "reasons": [], "tests": {}},
            ginkgo_report_keys={"s": ginkgo_report_key},
            entry=entry,
        )

    def append() -> Callable[[], object]:
        entry = _entry(prefix, next(counter))
        return lambda: append_to_manifest(store, key=manifest_key(prefix), entry=entry)

    cases: dict[str, Callable[[], Callable[[], object]]] = {
        "manifest append only": append,
        "whole publish, small report": lambda: publish(f"{prefix}in/small.json"),
        f"whole publish, {len(large_report) / 2**20:.0f} MB report": lambda: publish(
            f"{prefix}in/large.json"
        ),
    }
    metrics_mb = len(_metrics("x")) / 2**20
    print(
        f"| case ({options.history:,}-run manifest, metrics.json {metrics_mb:.1f} MB) | time | peak memory |"
    )
    print("|---|---|---|")
    for name, make in cases.items():
        seconds = statistics.median(_seconds(make()) for _ in range(options.repeat))
        peak = _peak_mib(make())
        print(f"| {name} | {seconds:.3f} s | {peak:.1f} MiB |")
    final = json.loads(store.read_text(manifest_key(prefix)) or "{}")
    print(f"\nmanifest now holds {len(final['runs']):,} runs ({len(manifest_text(final)) / 2**20:.1f} MB)")


if __name__ == "__main__":
    main()
