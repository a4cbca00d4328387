"""A realistic bad night for the alert tests: a failed scenario, a breach and a regression.

The run summary and the verdicts document are made by the pipeline's own code, so they have the shape
publish_results gives them: ``failed_night_documents`` as models, ``failed_night`` as pushed to XCom.
"""

from __future__ import annotations

import random
from typing import Any

from kai_scale.publishing.run_summary import RunSummary, ScenarioEntry, run_summary
from kai_scale.verdicts.change_points import DEFAULT_METHOD
from kai_scale.verdicts.comparison import compare_runs
from kai_scale.verdicts.document import Verdicts, verdicts_document, with_profiles
from kai_scale.verdicts.history import HistoricRun
from kai_scale.verdicts.profile_comparison import compare_cpu_profiles
from kai_scale.verdicts.regressions import find_regressions
from kai_scale.verdicts.thresholds import evaluate_thresholds
from kai_scale_model.outcome import Status
from tests.unit.provider.profiles.builder import HEAVY1, HEAVY3, fixture

RUN_ID = "20261122T020000Z-scheduled-1a2b3c4d"
FILL = "Fill Cluster with single GPU Jobs"
RECLAIM_REASON = "spec failed: expected all 4000 pods to be scheduled"


def fill(seconds: float) -> list[dict[str, Any]]:
    return [{"test_name": FILL, "status": "success", "details": {"nodes": 500, "time": f"{seconds:.1f}s"}}]


def _entry(scenario: str, status: Status, reason: str | None) -> ScenarioEntry:
    return ScenarioEntry(
        scenario=scenario,
        status=status,
        reason=reason,
        failure_kind="scenario" if status == "failure" else None,
        try_number=1,
        outcome_key=f"runs/{RUN_ID}/scenarios/{scenario}/try-1/outcome.json",
        ginkgo_report_key=None,
        outcome=None,
    )


def failed_night_documents() -> tuple[RunSummary, Verdicts]:
    """(run summary, verdicts): thirty nights at ~400 s, then 480 s, 484 s and tonight 490 s (max 7m)."""
    noise = random.Random(7)
    history = [
        HistoricRun(run_id=f"2026{night:04d}-scheduled", tests=fill(400 * (1 + noise.uniform(-0.05, 0.05))))
        for night in range(30)
    ]
    history += [
        HistoricRun(run_id="20260030-scheduled", tests=fill(480.0)),
        HistoricRun(run_id="20260031-scheduled", tests=fill(484.0)),
    ]
    # As results.json has them: the suite's entries, and one for the failed scenario.
    reclaim_failed = {
        "test_name": "reclaim",
        "status": "failure",
        "details": {"scenario": "reclaim", "message": RECLAIM_REASON},
    }
    tests = [*fill(490.0), reclaim_failed]
    thresholds = evaluate_thresholds(
        thresholds=[
            {"test_name": FILL, "detail": "time", "max": "7m"},
            {"test_name": FILL, "detail": "jobs", "min": 4000},
        ],
        tests=tests,
        where="include/scenarios/sanity-fill-cluster.yaml",
    )
    verdicts = verdicts_document(
        run_id=RUN_ID,
        node_count=500,
        tests=tests,
        thresholds=thresholds,
        regressions=find_regressions(run_id=RUN_ID, node_count=500, tests=tests, history=history),
        comparison=compare_runs(current=fill(490.0), previous=history[-1]),
        previous_run_ids={"sanity-fill-cluster": history[-1].run_id},
        method=DEFAULT_METHOD,
    )
    # The scheduler's CPU went to main.light more than in the previous run (tests/unit/provider/profiles).
    profile = compare_cpu_profiles(
        run=fixture(HEAVY1), baseline=fixture(HEAVY3), baseline_run_id=history[-1].run_id
    )
    verdicts = with_profiles(
        verdicts,
        comparisons={"sanity-fill-cluster": profile},
        scenario_tests={"sanity-fill-cluster": [FILL]},
    )
    entries = [
        _entry("sanity-fill-cluster", "success", None),
        _entry("reclaim", "failure", RECLAIM_REASON),
        _entry("topology", "skipped", "not selected for this run"),
    ]
    summary = run_summary(
        run_id=RUN_ID,
        params={"node_count": 500, "kai_ref": "v0.9.0"},
        entries=entries,
        runner_image="ghcr.io/kai-scale-pipeline/runner:main",
        image_ids={},
    )
    return summary.judged(verdict=verdicts.verdict, reasons=verdicts.reasons), verdicts


def failed_night() -> tuple[dict[str, Any], dict[str, Any]]:
    """(run summary, verdicts) of ``failed_night_documents`` as publish_results pushes them to XCom."""
    summary, verdicts = failed_night_documents()
    return summary.model_dump(mode="json"), verdicts.model_dump(mode="json")
