"""Judging a run against the history it reads from the bucket (a moto server: see conftest.py)."""

from __future__ import annotations

import pytest

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.publishing.verdicts_step import judge_run
from tests.unit.provider.publishing.published_runs import PREFIX, failed_scenario, publish, suite_test


def test_each_scenario_is_compared_with_its_own_previous_run(results_bucket: ResultsBucketHook) -> None:
    publish(results_bucket, night=0, tests=[suite_test("Fill", 100), suite_test("Reclaim", 50)])
    publish(results_bucket, night=1, tests=[suite_test("Fill", 101), failed_scenario("reclaim")])
    publish(results_bucket, night=2, tests=[failed_scenario("fill"), suite_test("Reclaim", 52)])
    publish(
        results_bucket, night=3, tests=[suite_test("Fill", 999), suite_test("Reclaim", 999)], node_count=100
    )
    tonight = {"fill": [suite_test("Fill", 110)], "reclaim": [suite_test("Reclaim", 55)]}

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

    assert verdicts.previous_run_ids == {"fill": "r1", "reclaim": "r2"}
    fill = verdicts.tests["Fill"]["time"].comparison
    assert fill is not None
    assert (fill.previous, fill.current, fill.previous_run_id) == (101.0, 110.0, "r1")
    assert fill.change_percent == pytest.approx(8.91, abs=0.01)
    reclaim = verdicts.tests["Reclaim"]["time"].comparison
    assert reclaim is not None
    assert (reclaim.previous, reclaim.previous_run_id) == (52.0, "r2")
