"""Runs published into a test bucket as publish_results leaves them: results.json, then the manifest entry."""

from __future__ import annotations

import json
from typing import Any

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.object_keys import manifest_key, published_keys
from kai_scale.publishing.publisher import append_to_manifest

PREFIX = "Public/"


def suite_test(name: str, seconds: float) -> dict[str, Any]:
    """A suite's test entry with a duration detail."""
    return {"test_name": name, "status": "success", "details": {"time": f"{seconds}s"}}


def failed_scenario(scenario: str) -> dict[str, Any]:
    """The entry results.json has for a failed scenario (kai_scale.publishing.results_document)."""
    return {"test_name": scenario, "status": "failure", "details": {"scenario": scenario, "message": "boom"}}


def publish(
    bucket: ResultsBucketHook, *, night: int, tests: list[dict[str, Any]], node_count: int = 500
) -> None:
    """Run ``r<night>``, published on the night's date; failed when one of its entries is."""
    run_id = f"r{night}"
    status = "failure" if any(t["status"] == "failure" for t in tests) else "success"
    results_key = published_keys(prefix=PREFIX, run_id=run_id).results
    bucket.write_text(
        key=results_key, text=json.dumps({"metadata": {}, "results": {"status": status, "tests": tests}})
    )
    append_to_manifest(
        bucket,
        key=manifest_key(PREFIX),
        entry={
            "timestamp": f"2026-11-{1 + night:02d}T02:00:00Z",
            "path": results_key,
            "run_id": run_id,
            "node_count": node_count,
            "status": status,
        },
    )
