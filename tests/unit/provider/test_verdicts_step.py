"""Judging a run against the history it reads from the bucket (a moto server: see conftest.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.object_keys import manifest_key, published_keys
from kai_scale.publishing.publisher import append_to_manifest
from kai_scale.publishing.verdicts_step import judge_run

PREFIX = "Public/"


def _test(name: str, seconds: float) -> dict[str, Any]:
    return {"test_name": name, "status": "success", "details": {"time": f"{seconds}s"}}


def _failed(scenario: str) -> dict[str, Any]:
    """The entry results.json has for a failed scenario (kai_scale.publishing.results_document)."""
    return {"test_name": scenario, "status": "failure", "details": {"scenario": scenario, "message": "boom"}}


def _publish(
    bucket: ResultsBucketHook, night: int, tests: list[dict[str, Any]], node_count: int = 500
) -> None:
    """A published run as publish_results leaves it: its results.json, then its manifest entry."""
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


def test_each_scenario_is_compared_with_its_own_previous_run(results_bucket: ResultsBucketHook) -> None:
    _publish(results_bucket, 0, [_test("Fill", 100), _test("Reclaim", 50)])
    _publish(results_bucket, 1, [_test("Fill", 101), _failed("reclaim")])
    _publish(results_bucket, 2, [_failed("fill"), _test("Reclaim", 52)])
    _publish(results_bucket, 3, [_test("Fill", 999), _test("Reclaim", 999)], node_count=100)
    tonight = {"fill": [_test("Fill", 110)], "reclaim": [_test("Reclaim", 55)]}

    verdicts = judge_run(
        results_bucket,
        prefix=PREFIX,
        run_id="r4",
        node_count=500,
        scenarios=[],
        tests=[*tonight["fill"], *tonight["reclaim"]],
        scenario_tests=tonight,
        include_dir="include",
    )

    assert verdicts["previous_run_ids"] == {"fill": "r1", "reclaim": "r2"}
    fill = verdicts["tests"]["Fill"]["time"]["comparison"]
    assert (fill["previous"], fill["current"], fill["previous_run_id"]) == (101.0, 110.0, "r1")
    assert fill["change_percent"] == pytest.approx(8.91, abs=0.01)
    reclaim = verdicts["tests"]["Reclaim"]["time"]["comparison"]
    assert (reclaim["previous"], reclaim["previous_run_id"]) == (52.0, "r2")
