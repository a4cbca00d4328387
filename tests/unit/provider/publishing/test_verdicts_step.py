"""Judging a run against the history it reads from the bucket (a moto server: see conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.metrics.collection import POD_BINDING_RATE, pods_bound
from kai_scale.object_keys import published_keys, run_file_key
from kai_scale.profiles.collection import (
    CPU_PROFILE,
    CollectedProfile,
    RunProfiles,
    ScenarioProfiles,
    missing_scenario,
    profile_file,
)
from kai_scale.profiles.summary import summarize
from kai_scale.publishing.verdicts_step import judge_run
from tests.unit.provider.profiles.builder import HEAVY1, HEAVY3, fixture
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
        profiles=RunProfiles(run_id="r4", scenarios={}),
        run_pods={},
    )

    assert verdicts.previous_run_ids == {"fill": "r1", "reclaim": "r2"}
    fill = verdicts.tests["Fill"]["time"].comparison
    assert fill is not None
    assert (fill.previous, fill.current, fill.previous_run_id) == (101.0, 110.0, "r1")
    assert fill.change_percent == pytest.approx(8.91, abs=0.01)
    reclaim = verdicts.tests["Reclaim"]["time"].comparison
    assert reclaim is not None
    assert (reclaim.previous, reclaim.previous_run_id) == (52.0, "r2")


def _collected(run_id: str, scenario: str, profile: Path, bucket: ResultsBucketHook) -> ScenarioProfiles:
    """``scenario``'s CPU profile of run ``run_id`` written where collect_metrics writes it."""
    file = profile_file(scenario, CPU_PROFILE)
    bucket.write_bytes(
        key=run_file_key(run_id, file), data=profile.read_bytes(), content_type="application/gzip"
    )
    cpu = CollectedProfile(status="collected", file=file, summary=summarize(fixture(profile), "cpu"))
    return ScenarioProfiles(
        status="partial", reason=None, service="kai-scheduler", window=None, profiles={CPU_PROFILE: cpu}
    )


def test_each_cpu_profile_is_compared_with_its_previous_runs_per_pod_bound(
    results_bucket: ResultsBucketHook,
) -> None:
    """r0 published fill's profile (cpu_heavy3) and metrics (100 pods bound); tonight's is cpu_heavy1."""
    publish(results_bucket, night=0, tests=[suite_test("Fill", 100), suite_test("Reclaim", 50)])
    published = published_keys(prefix=PREFIX, run_id="r0")
    fill_file = profile_file("fill", CPU_PROFILE)
    results_bucket.write_bytes(
        key=published.beside(fill_file), data=HEAVY3.read_bytes(), content_type="application/gzip"
    )
    window = {"start": "2026-11-01T02:00:00+00:00", "end": "2026-11-01T02:01:40+00:00", "source": "runner"}
    binding = {"summary": {"samples": 7, "min": 0, "avg": 1.0, "max": 2, "p50": 1, "p90": 2, "p99": 2}}
    metrics = {"scenarios": {"fill": {"window": window, "metrics": {POD_BINDING_RATE: binding}}}}
    results_bucket.write_text(key=published.metrics, text=json.dumps(metrics))
    not_collected = missing_scenario(
        scenario="reclaim", service="kai-scheduler", reason="Pyroscope down"
    ).entry
    profiles = RunProfiles(
        run_id="r1",
        scenarios={"fill": _collected("r1", "fill", HEAVY1, results_bucket), "reclaim": not_collected},
    )

    verdicts = judge_run(
        results_bucket,
        prefix=PREFIX,
        run_id="r1",
        node_count=500,
        scenarios=[],
        tests=[suite_test("Fill", 110), suite_test("Reclaim", 55)],
        scenario_tests={"fill": [suite_test("Fill", 110)], "reclaim": [suite_test("Reclaim", 55)]},
        include_dir="include",
        profiles=profiles,
        run_pods={"fill": 200, "reclaim": None},
    )

    fill = verdicts.profiles["fill"].comparison
    assert fill is not None
    assert fill.baseline_run_id == "r0"
    assert fill.cumulative_grew[0].function == "main.light"
    assert fill.baseline_cpu_seconds_per_pod == pytest.approx(fill.baseline_cpu_seconds / 100)
    assert fill.run_cpu_seconds_per_pod == pytest.approx(fill.run_cpu_seconds / 200)
    assert verdicts.profiles["reclaim"].reason == "this run's CPU profile was not collected: Pyroscope down"
    assert not verdicts.profiles["fill"].flagged, "no threshold or change point: only compared"


def test_a_previous_run_without_a_profile_is_said(results_bucket: ResultsBucketHook) -> None:
    publish(results_bucket, night=0, tests=[suite_test("Fill", 100)])
    profiles = RunProfiles(run_id="r1", scenarios={"fill": _collected("r1", "fill", HEAVY1, results_bucket)})
    verdicts = judge_run(
        results_bucket,
        prefix=PREFIX,
        run_id="r1",
        node_count=500,
        scenarios=[],
        tests=[suite_test("Fill", 110)],
        scenario_tests={"fill": [suite_test("Fill", 110)]},
        include_dir="include",
        profiles=profiles,
        run_pods={},
    )
    assert verdicts.profiles["fill"].reason == "run r0 has no CPU profile (Public/r0/profiles/fill/cpu.pb.gz)"


def test_pods_bound_is_the_binding_rates_mean_times_the_window() -> None:
    window = {"start": "2026-11-01T02:00:00Z", "end": "2026-11-01T02:05:00Z", "source": "runner"}
    entry = {"window": window, "metrics": {POD_BINDING_RATE: {"summary": {"avg": 13.4}}}}
    assert pods_bound(entry) == 4020
    assert pods_bound({"window": window, "metrics": {POD_BINDING_RATE: {"status": "missing"}}}) is None
    assert pods_bound(None) is None
    assert pods_bound({"window": None, "metrics": {}}) is None
