"""A small published history for the trend view: passes, a failed scenario and a regression.

Nightly runs at 500 nodes, written the way ``publish_results`` writes them: the documents come from the
pipeline's own functions (results document, run summary, verdicts judged by ``judge_run`` against the
runs before, ``publish_run``), so the view is tested on what the pipeline publishes, not on a copy of
its format: by its unit tests (``tests/unit/provider/views/test_published_history.py``) and in the
browser (``tests/integration/airflow_deployment/test_trend_view.py``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.object_keys import run_file_key, run_summary_key
from kai_scale.profiles.collection import (
    CPU_PROFILE,
    CollectedProfile,
    RunProfiles,
    ScenarioProfiles,
    profile_file,
)
from kai_scale.profiles.summary import summarize
from kai_scale.publishing.publisher import copy_run_files, publish_run
from kai_scale.publishing.results_document import RunMetadata, manifest_entry, results_document, timestamp
from kai_scale.publishing.run_summary import ScenarioEntry, run_summary
from kai_scale.publishing.verdicts_step import judge_run
from kai_scale.run_id import pipeline_run_id
from kai_scale_model.outcome import ScenarioOutcome, TestResult
from kai_scale_model.scenario import Scenario
from tests.unit.provider.profiles.builder import HEAVY1, HEAVY3, fixture

NODE_COUNT = 500
RUNS = 16
FAILED_RUN = 6
"""The run in which ``reclaim`` fails."""
REGRESSION_FROM = 13
"""The first run of the slower Fill Cluster time (the KAI ref changes there too)."""
FILL_TEST = "Fill Cluster with single GPU Jobs"
THROUGHPUT_TEST = "GPU pod scheduling throughput"
FILL_MAX = "9m"
"""The sanity-fill-cluster scenario's threshold on its time (540 s: the regression stays under it)."""
FAILURE_REASON = "spec failed: expected all 4000 pods to be scheduled"
PROFILED_SCENARIO = "sanity-fill-cluster"
# The last two runs publish the scheduler's CPU profile of PROFILED_SCENARIO, the Go runtime's own
# (tests/unit/provider/profiles/fixtures): main.light's share grows in the newest, which the verdicts name.
PROFILES = {RUNS - 2: HEAVY3, RUNS - 1: HEAVY1}
TRUNCATED_SCENARIO = "gpu-pod-throughput"


@dataclass(frozen=True, kw_only=True)
class PublishedHistory:
    """What was published, for the assertions."""

    prefix: str
    """The published prefix."""
    run_ids: list[str]
    """Oldest first."""
    airflow_run_ids: list[str]
    """Each run's Airflow run id."""
    timestamps: list[str]
    """Each run's time, as its manifest entry has it."""
    kai_refs: list[str]
    """Each run's KAI ref."""
    commits: list[str]
    """Each run's KAI commit."""
    verdicts: list[str]
    """Each run's verdict."""
    keys: list[str]
    """Every object written (removed afterwards)."""

    @property
    def regressed(self) -> list[str]:
        """Runs whose verdict is ``regression``."""
        return [
            run for run, verdict in zip(self.run_ids, self.verdicts, strict=True) if verdict == "regression"
        ]


SCENARIOS = [
    Scenario.model_validate(
        {
            "name": "sanity-fill-cluster",
            "description": "fill the cluster",
            "timeout": "90m",
            "run": {"kind": "ginkgo", "focus": "Big cluster Sanity Fill Cluster"},
            "thresholds": [{"test_name": FILL_TEST, "detail": "time", "max": FILL_MAX}],
        }
    ),
    Scenario.model_validate(
        {
            "name": "gpu-pod-throughput",
            "description": "GPU pods scheduled per second",
            "timeout": "30m",
            "run": {"kind": "workload", "pods_per_node": 4},
        }
    ),
    Scenario.model_validate(
        {
            "name": "reclaim",
            "description": "reclaim GPUs",
            "timeout": "90m",
            "run": {"kind": "ginkgo", "focus": "Whole GPU Tests Reclaim"},
        }
    ),
]


def _fill_seconds(index: int) -> float:
    # About 1 % of noise, then 22 % slower from REGRESSION_FROM on.
    level = 484.0 if index >= REGRESSION_FROM else 396.0
    return level + (index * 7 % 5 - 2) * 1.6


def _duration(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:.1f}s"


def _outcome(scenario: str, started: datetime, tests: list[dict[str, Any]], commit: str) -> ScenarioOutcome:
    return ScenarioOutcome(
        scenario=scenario,
        kind="ginkgo",
        status="success",
        reason=None,
        started_at=started.isoformat(),
        finished_at=(started + timedelta(minutes=8)).isoformat(),
        exit_code=0,
        tests=tuple(TestResult(**test) for test in tests),
        kai_commit_hash=commit,
    )


def _entries(index: int, started: datetime, commit: str) -> list[ScenarioEntry]:
    fill = _fill_seconds(index)
    fill_test = {
        "test_name": FILL_TEST,
        "status": "success",
        "details": {"nodes": NODE_COUNT, "jobs": 4000, "time": _duration(fill)},
    }
    throughput = {
        "test_name": THROUGHPUT_TEST,
        "status": "success",
        "details": {
            "nodes": NODE_COUNT,
            "pods": 2000,
            "create rate (pods/s)": 480.0 + index % 5 * 4,
            "time to all scheduled (seconds)": 18.2 + index % 4 / 10,
            "throughput average (pods/s)": 110.0 + index % 3,
            "throughput p50 (pods/s)": 104.0 + index % 4,
            "throughput p90 (pods/s)": 125.0 + index % 3,
            "throughput p99 (pods/s)": 131.0 + index % 2,
        },
    }
    reclaim_test = {
        "test_name": "Reclaim GPU Jobs",
        "status": "success",
        "details": {"time": _duration(61.0 + index % 3)},
    }

    def entry(scenario: str, tests: list[dict[str, Any]], offset: int) -> ScenarioEntry:
        return ScenarioEntry(
            scenario=scenario,
            status="success",
            reason=None,
            failure_kind=None,
            try_number=1,
            outcome_key=f"runs/x/scenarios/{scenario}/try-1/outcome.json",
            ginkgo_report_key=None,
            outcome=_outcome(scenario, started + timedelta(minutes=10 * offset), tests, commit),
        )

    reclaim = entry("reclaim", [reclaim_test], 2)
    if index == FAILED_RUN:
        reclaim = ScenarioEntry(
            scenario="reclaim",
            status="failure",
            reason=FAILURE_REASON,
            failure_kind="scenario",
            try_number=2,
            outcome_key=reclaim.outcome_key,
            ginkgo_report_key=None,
            outcome=replace(reclaim.outcome, status="failure", reason=FAILURE_REASON, tests=())
            if reclaim.outcome
            else None,
        )
    return [
        entry("sanity-fill-cluster", [fill_test], 0),
        entry("gpu-pod-throughput", [throughput], 1),
        reclaim,
    ]


def _metrics(run_id: str, entries: list[ScenarioEntry]) -> dict[str, Any]:
    """Two named queries per scenario over its window, at 15 s steps."""
    scenarios = {}
    for entry in entries:
        assert entry.outcome is not None, "every scenario of the history ran"
        start = datetime.fromisoformat(entry.outcome.started_at)
        end = datetime.fromisoformat(entry.outcome.finished_at)
        steps = [
            start.timestamp() + 15 * step for step in range(int((end - start).total_seconds() // 15) + 1)
        ]
        latency = {
            "query": "histogram_quantile(0.99, ...)",
            "unit": "ms",
            "description": "KAI e2e scheduling latency p99",
            "status": "ok",
            "error": None,
            "series": [
                {"labels": {"action": action}, "values": [[t, base + (i % 7)] for i, t in enumerate(steps)]}
                for action, base in (("allocate", 40.0), ("reclaim", 65.0))
            ],
        }
        binding = {
            "query": 'sum(rate(apiserver_request_total{subresource="binding"}[1m]))',
            "unit": "1/s",
            "description": "pod binding rate",
            "status": "ok",
            "error": None,
            "series": [{"labels": {}, "values": [[t, 100.0 + i % 11] for i, t in enumerate(steps)]}],
        }
        scenarios[entry.scenario] = {
            "status": "collected",
            "reason": None,
            "window": {"start": start.isoformat(), "end": end.isoformat(), "source": "runner"},
            "metrics": {"kai_e2e_scheduling_latency_p99": latency, "pod_binding_rate": binding},
        }
    # As the view reads metrics.json: the series it charts, no summaries.
    return {"run_id": run_id, "prometheus": None, "step_seconds": 15.0, "scenarios": scenarios}


def _profiles(store: ResultsBucketHook, run_id: str, index: int) -> tuple[RunProfiles, list[str]]:
    """The run's profiles document, and its files written under ``runs/``, as collect_metrics leaves them.

    The newest run's TRUNCATED_SCENARIO has a CPU profile whose file lost its end after it was read.
    """
    path = PROFILES.get(index)
    if path is None:
        return RunProfiles(run_id=run_id, scenarios={}), []  # runs published before profiles existed
    written = {PROFILED_SCENARIO: path.read_bytes()}
    if index == RUNS - 1:
        written[TRUNCATED_SCENARIO] = path.read_bytes()[:-40]
    scenarios, files = {}, []
    for name, data in written.items():
        file = profile_file(name, CPU_PROFILE)
        store.write_bytes(key=run_file_key(run_id, file), data=data, content_type="application/gzip")
        files.append(file)
        collected = CollectedProfile(status="collected", file=file, summary=summarize(fixture(path), "cpu"))
        scenarios[name] = ScenarioProfiles(
            status="partial",
            reason="not collected: alloc_space, inuse_space",
            service="kai-scheduler",
            window=None,
            profiles={CPU_PROFILE: collected},
        )
    return RunProfiles(run_id=run_id, scenarios=scenarios), files


def publish_history(store: ResultsBucketHook, *, prefix: str, now: datetime, tag: str) -> PublishedHistory:
    """Publish ``RUNS`` nightly runs, the newest a day before ``now``, each judged against the ones before.

    :param tag: ends each Airflow run id, so the run ids (and their run summaries under ``runs/``, which
        the prefix does not separate) are never those of real runs in the same bucket.
    """
    history = PublishedHistory(
        prefix=prefix,
        run_ids=[],
        airflow_run_ids=[],
        timestamps=[],
        kai_refs=[],
        commits=[],
        verdicts=[],
        keys=[],
    )
    for index in range(RUNS):
        run_after = (now - timedelta(days=RUNS - index)).replace(hour=2, minute=0, second=0, microsecond=0)
        airflow_run_id = f"scheduled__{run_after.isoformat()}_{tag}"
        run_id = pipeline_run_id(airflow_run_id=airflow_run_id, run_after=run_after)
        kai_ref = "v0.10.0" if index >= REGRESSION_FROM else "v0.9.0"
        commit = ("c0ffee" if index >= REGRESSION_FROM else "5eed00") + f"{index:034x}"
        entries = _entries(index, run_after, commit)
        metadata = RunMetadata(
            kai_scheduler_ref=kai_ref,
            kai_commit_hash=commit,
            kwok_node_count=NODE_COUNT,
            cluster_node_count=NODE_COUNT + 3,
            test_focus="",
            timestamp=timestamp(run_after.astimezone(UTC)),
            service_resources={},
            kubernetes_version="v1.34.1",
            kai_images={},
            runner_image="ghcr.io/kai-scale-pipeline/runner:main",
            runner_image_ids={},
        )
        profiles, files = _profiles(store, run_id, index)
        copy_run_files(store, prefix=prefix, run_id=run_id, files=files)  # as publish_results does
        results = results_document(metadata=metadata, entries=entries, profiles=profiles)
        succeeded = {entry.scenario for entry in entries if entry.status == "success"}
        verdicts = judge_run(
            store,
            prefix=prefix,
            run_id=run_id,
            node_count=NODE_COUNT,
            scenarios=[scenario for scenario in SCENARIOS if scenario.name in succeeded],
            tests=results.model_dump(mode="json")["results"]["tests"],
            scenario_tests={
                entry.scenario: [asdict(test) for test in entry.outcome.tests]
                for entry in entries
                if entry.outcome and entry.outcome.tests
            },
            include_dir="include",
            profiles=profiles,
            run_pods={},
        )
        summary = run_summary(
            run_id=run_id,
            params={"node_count": NODE_COUNT, "kai_ref": kai_ref},
            entries=entries,
            runner_image=metadata.runner_image,
            image_ids={},
        )
        store.write_text(key=run_summary_key(run_id), text=json.dumps(summary.model_dump(mode="json")))
        published = publish_run(
            store,
            prefix=prefix,
            run_id=run_id,
            results=results.model_dump(mode="json"),
            metrics_text=json.dumps(_metrics(run_id, entries)),
            verdicts=verdicts.model_dump(mode="json"),
            ginkgo_report_keys={},
            entry=manifest_entry(
                run_id=run_id,
                results_key=f"{prefix}{run_id}/results.json",
                metadata=metadata,
                status=summary.status,
                airflow_run_id=airflow_run_id,
                verdict=verdicts.verdict,
                failure_kind=summary.failure_kind,
                failed_scenarios=summary.failed_scenarios,
                not_run_scenarios=summary.not_run_scenarios,
            ).model_dump(mode="json"),
        )
        history.run_ids.append(run_id)
        history.airflow_run_ids.append(airflow_run_id)
        history.timestamps.append(metadata.timestamp)
        history.kai_refs.append(kai_ref)
        history.commits.append(commit)
        history.verdicts.append(verdicts.verdict)
        keys = published.keys
        history.keys.extend(
            [run_summary_key(run_id), keys.results, keys.ginkgo_report, keys.metrics, keys.verdicts]
        )
        history.keys.extend([*(run_file_key(run_id, file) for file in files), *map(keys.beside, files)])
    history.keys.append(f"{prefix}manifest.json")
    return history
