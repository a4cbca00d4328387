from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from pydantic import BaseModel

from kai_scale.cluster.kai_tuning import load_profile
from kai_scale.metrics.collection import Window
from kai_scale.profiles.collection import ProfileType, RunProfiles, collect_scenario, unwritten_profiles
from kai_scale.publishing.results_document import (
    ManifestEntry,
    ResultsDocument,
    RunMetadata,
    commit_hash,
    ginkgo_focus,
    manifest_entry,
    results_document,
    service_resources,
    timestamp,
)
from kai_scale.publishing.run_summary import ScenarioEntry, scenario_entry
from kai_scale.scenario_files import load_scenarios
from kai_scale_model.outcome import ScenarioOutcome
from kai_scale_model.outcome import TestResult as SuiteEntry  # pytest would collect a class named Test*
from kai_scale_model.runner_interface import GINKGO_REPORT, OUTCOME
from tests.conftest import REPO
from tests.unit.provider.profiles.builder import profile_bytes

FILL = SuiteEntry(
    test_name="Fill Cluster with single GPU Jobs",
    status="success",
    details={"nodes": 500, "jobs": 4000, "time": "6m36.737854402s"},
)
METADATA = RunMetadata(
    kai_scheduler_ref="v0.9.0",
    kai_commit_hash=None,
    kwok_node_count=500,
    cluster_node_count=503,
    test_focus="Big cluster Sanity Fill Cluster",
    timestamp="2026-11-22T02:00:00Z",
    service_resources={},
    kubernetes_version="v1.34.4",
    kai_images={"binder": ["registry/local/kai-scheduler/binder:0.0.0"]},
    runner_image="ghcr.io/kai-scale-pipeline/runner:v0.9.0",
    runner_image_ids={"reclaim": "ghcr.io/kai-scale-pipeline/runner@sha256:" + "0" * 64},
)


def _entry(
    scenario: str, status: str, tests: tuple[SuiteEntry, ...] = (), commit: str | None = None
) -> ScenarioEntry:
    outcome = ScenarioOutcome(
        scenario=scenario,
        kind="ginkgo",
        status=status,  # type: ignore[arg-type]
        reason=None if status == "success" else f"{scenario} went wrong",
        started_at="2026-11-22T02:00:00Z",
        finished_at="2026-11-22T02:10:00Z",
        tests=tests,
        kai_commit_hash=commit,
    )
    outputs = {"try_number": 1, "keys": {OUTCOME: "r", GINKGO_REPORT: "p"}}
    selected = status != "skipped"  # a skipped scenario is one the run did not select
    return scenario_entry(
        scenario=scenario,
        selected=selected,
        outputs=outputs if selected else None,
        outcome_text=outcome.to_json() if selected else None,
        ginkgo_report_exists=selected,
    )


def test_results_keep_the_suites_tests_exactly_and_name_failed_scenarios() -> None:
    entries = [
        _entry("sanity-fill-cluster", "success", (FILL,)),
        _entry("reclaim", "failure"),
        _entry("topology", "skipped"),
    ]
    document = results_document(metadata=METADATA, entries=entries).model_dump(mode="json")
    assert set(document) == {"metadata", "results"}
    assert document["results"]["status"] == "failure"
    tests = document["results"]["tests"]
    assert tests[0] == {
        "test_name": "Fill Cluster with single GPU Jobs",
        "status": "success",
        "details": {"nodes": 500, "jobs": 4000, "time": "6m36.737854402s"},
    }
    assert tests[1] == {
        "test_name": "reclaim",
        "status": "failure",
        "details": {"scenario": "reclaim", "message": "reclaim went wrong", "failure_kind": "scenario"},
    }
    assert tests[2]["status"] == "skipped"
    assert document["results"]["failure_kind"] == "scenario"
    json.dumps(document)  # serialisable as is


def test_metadata_has_the_dashboards_fields_and_what_really_ran() -> None:
    document = results_document(metadata=METADATA, entries=[_entry("a", "success")]).model_dump(mode="json")
    assert set(document["metadata"]) >= {
        "kai_scheduler_ref",
        "kai_commit_hash",
        "kwok_node_count",
        "cluster_node_count",
        "test_focus",
        "timestamp",
        "service_resources",
    }
    metadata = document["metadata"]
    assert metadata["kubernetes_version"] == "v1.34.4"
    assert metadata["kai_images"] == {"binder": ["registry/local/kai-scheduler/binder:0.0.0"]}
    assert metadata["runner_image_ids"]["reclaim"].endswith("@sha256:" + "0" * 64)
    assert document["results"]["status"] == "success"


def test_the_profiles_go_beside_the_dashboards_fields_as_collected() -> None:
    profiles = unwritten_profiles(run_id="r1", scenarios=["a"], service="kai-scheduler")
    document = results_document(
        metadata=METADATA, entries=[_entry("a", "success")], profiles=profiles
    ).model_dump(mode="json")
    assert document["profiles"] == profiles.model_dump(mode="json")["scenarios"]
    assert document["profiles"]["a"]["profiles"]["cpu"] == {
        "status": "missing",
        "reason": "the collect_metrics task wrote no profiles (see its log)",
    }
    json.dumps(document)  # JSON as it is
    without = results_document(metadata=METADATA, entries=[_entry("a", "success")])
    assert "profiles" not in without.model_dump(mode="json")


def test_a_skipped_scenario_does_not_fail_the_run() -> None:
    document = results_document(metadata=METADATA, entries=[_entry("a", "success"), _entry("b", "skipped")])
    assert (document.results.status, document.results.failure_kind) == ("success", None)


def test_a_scenario_that_did_not_run_makes_the_run_incomplete_not_failed() -> None:
    entries = [_entry("a", "success"), _entry("topology", "not_run"), _entry("b", "skipped")]
    document = results_document(metadata=METADATA, entries=entries).model_dump(mode="json")
    assert (document["results"]["status"], document["results"]["failure_kind"]) == ("incomplete", None)
    assert document["results"]["tests"][-2] == {
        "test_name": "topology",
        "status": "not_run",
        "details": {"scenario": "topology", "message": "topology went wrong"},
    }
    failed = results_document(metadata=METADATA, entries=[*entries, _entry("reclaim", "failure")])
    assert failed.results.status == "failure", "a failure outweighs a scenario not run"


def test_service_resources_come_from_the_deployments_tuning_profile() -> None:
    resources = service_resources(load_profile(REPO / "include", "scale").patches)
    assert set(resources) == {"scheduler", "binder", "podGroupController", "queueController", "podGrouper"}
    assert resources["scheduler"] == {
        "requests": {"cpu": "3", "memory": "7Gi"},
        "limits": {"cpu": "5", "memory": "7Gi"},
    }
    local = service_resources(load_profile(REPO / "include", "local").patches)
    assert set(local) == set(resources)
    assert local["scheduler"]["requests"] == {"cpu": "250m", "memory": "1Gi"}


def test_focus_of_the_selected_suite_scenarios() -> None:
    scenarios = load_scenarios(REPO / "include" / "scenarios")
    assert ginkgo_focus(scenarios, ["sanity-fill-cluster", "gpu-pod-throughput"]) == (
        "Big cluster Sanity Fill Cluster"
    )
    both = ginkgo_focus(scenarios, ["sanity-fill-cluster", "reclaim"])
    assert both == "(Whole GPU Tests Reclaim)|(Big cluster Sanity Fill Cluster)", "in scenario order"
    assert ginkgo_focus(scenarios, ["gpu-pod-throughput"]) == ""


def test_timestamp_is_utc_with_z() -> None:
    moment = datetime(2026, 11, 22, 7, 30, tzinfo=timezone(timedelta(hours=5)))
    assert timestamp(moment) == "2026-11-22T02:30:00Z"
    assert timestamp(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05Z"


def test_commit_is_the_runners_else_the_ref() -> None:
    entries = [_entry("a", "success"), _entry("b", "success", commit="0123456789abcdef")]
    assert commit_hash(entries) == "0123456789abcdef"
    with_commit = METADATA.model_copy(update={"kai_commit_hash": commit_hash(entries)})
    entry = manifest_entry(
        run_id="r",
        results_key="Public/r/results.json",
        metadata=with_commit,
        status="success",
        airflow_run_id="m",
        verdict="pass",
        failure_kind=None,
        failed_scenarios=[],
        not_run_scenarios=[],
    ).model_dump(mode="json")
    assert entry["commit"] == "0123456789abcdef"
    assert entry["path"] == "Public/r/results.json"
    assert {"timestamp", "path", "commit", "run_id", "node_count", "status"} <= set(entry)
    without = manifest_entry(
        run_id="r",
        results_key="Public/r/results.json",
        metadata=METADATA,
        status="failure",
        airflow_run_id="m",
        verdict="failure",
        failure_kind="infrastructure",
        failed_scenarios=("reclaim",),
        not_run_scenarios=("topology",),
    ).model_dump(mode="json")
    assert without["commit"] == "v0.9.0"
    # Beyond the dashboard's fields, which stay as they were: what the trend view searches.
    assert (without["verdict"], without["failure_kind"]) == ("failure", "infrastructure")
    assert (without["failed_scenarios"], without["not_run_scenarios"]) == (["reclaim"], ["topology"])
    assert json.loads(json.dumps(without)) == without


# results.json and the manifest entry exactly as publish_results wrote them before they were models
# (json.dumps of the dicts, indent 2): a run with a scenario failed, one not run and one skipped; a run
# with profiles, one scenario's read from Pyroscope and one's never written.
AS_WRITTEN = Path(__file__).parent
WRITTEN_METADATA = METADATA.model_copy(
    update={
        "kai_commit_hash": "0123456789abcdef",
        "cluster_node_count": None,
        "test_focus": "(Whole GPU Tests Reclaim)|(Big cluster Sanity Fill Cluster)",
        "service_resources": service_resources(load_profile(REPO / "include", "scale").patches),
        "runner_image_ids": {
            "sanity-fill-cluster": "ghcr.io/kai-scale-pipeline/runner@sha256:0f",
            "reclaim": None,
        },
    }
)
START = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)


def _written(document: BaseModel) -> str:
    # As publisher.py writes results.json.
    return json.dumps(document.model_dump(mode="json"), indent=2) + "\n"


def _run_with_every_status() -> list[ScenarioEntry]:
    unreported = SuiteEntry(test_name="Reclaim 4000 single GPU Jobs", status="failure", details=None)
    return [
        _entry("sanity-fill-cluster", "success", (FILL,), commit="0123456789abcdef"),
        _entry("reclaim", "failure", (unreported,)),
        _entry("topology", "not_run"),
        _entry("gpu-pod-throughput", "skipped"),
    ]


def _profiles() -> RunProfiles:
    cpu = profile_bytes([(("main.heavy", "main.main"), (3, 30_000_000)), (("main.main",), (1, 10_000_000))])

    def fetch(profile_type: ProfileType, window: Window) -> bytes:
        # A CPU profile for every type: the memory types find no sample type of theirs in it.
        return cpu

    window = Window(start=START, end=START + timedelta(minutes=3), source="runner")
    read = collect_scenario(fetch, scenario="sanity-fill-cluster", service="kai-scheduler", window=window)
    unwritten = unwritten_profiles(run_id="r1", scenarios=["reclaim"], service="kai-scheduler")
    return RunProfiles(run_id="r1", scenarios={"sanity-fill-cluster": read.entry, **unwritten.scenarios})


def test_results_are_written_as_they_always_were() -> None:
    document = results_document(metadata=WRITTEN_METADATA, entries=_run_with_every_status())
    written = (AS_WRITTEN / "results_as_written.json").read_text()
    assert _written(document) == written
    assert ResultsDocument.model_validate_json(written) == document, "the model is the file's schema"


def test_results_with_profiles_are_written_as_they_always_were() -> None:
    entries = [_entry("sanity-fill-cluster", "success", (FILL,)), _entry("reclaim", "failure")]
    document = results_document(metadata=WRITTEN_METADATA, entries=entries, profiles=_profiles())
    written = (AS_WRITTEN / "results_with_profiles_as_written.json").read_text()
    assert _written(document) == written
    assert ResultsDocument.model_validate_json(written) == document


def test_the_manifest_entry_is_written_as_it_always_was() -> None:
    entry = manifest_entry(
        run_id="20261122T020000Z-scheduled-1a2b3c4d",
        results_key="Public/20261122T020000Z-scheduled-1a2b3c4d/results.json",
        metadata=WRITTEN_METADATA,
        status="failure",
        airflow_run_id="scheduled__2026-11-22T02:00:00+00:00",
        verdict="failure",
        failure_kind="scenario",
        failed_scenarios=("reclaim",),
        not_run_scenarios=["topology"],
    )
    written = (AS_WRITTEN / "manifest_entry_as_written.json").read_text()
    assert _written(entry) == written
    assert ManifestEntry.model_validate_json(written) == entry


def test_nan_in_a_suites_detail_is_written_as_json_dumps_writes_it() -> None:
    rate = SuiteEntry(test_name="t", status="success", details={"rate": math.nan, "peak": math.inf})
    document = results_document(metadata=METADATA, entries=[_entry("a", "success", (rate,))])
    assert '"rate": NaN,\n' in _written(document)
    assert '"peak": Infinity\n' in _written(document)
