"""``results.json`` in the schema the KAI scale-test dashboard reads, and the run's manifest entry. Pure.

Test entries are the suite's own (``test_name``, ``status``, ``details`` exactly as written), so the
dashboard plots them; a scenario that failed, did not run or was skipped adds an entry named after the
scenario, with its status and the reason (and a failure's kind), so it is never silently absent.
Beyond the dashboard's fields (it ignores them): ``results.failure_kind``, ``profiles`` and the manifest
entry's ``verdict``, ``failure_kind``, ``failed_scenarios`` and ``not_run_scenarios``.

``ResultsDocument`` and ``ManifestEntry`` are what this run writes: ``results_document`` and
``manifest_entry`` build them, ``model_dump(mode="json")`` writes them key for key as they always were.
Readers of the published history (the trend view, the verdicts' earlier runs) read it as JSON: it holds
documents of older shapes, and entries other writers made.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from kai_scale.cluster.kai_tuning import TuningPatch
from kai_scale.profiles.collection import RunProfiles, ScenarioProfiles
from kai_scale.publishing.run_summary import RunStatus, ScenarioEntry, run_failure_kind, run_status
from kai_scale.verdicts.document import Verdict
from kai_scale_model.outcome import FailureKind
from kai_scale_model.scenario import GinkgoRun, Scenario
from kai_scale_model.validation import JsonDocument

# KAI services whose resources the tuning sets (the dashboard's service_resources keys).
KAI_SERVICES = ("scheduler", "binder", "podGroupController", "queueController", "podGrouper")


class RunMetadata(JsonDocument):
    """The ``metadata`` block, field for field."""

    kai_scheduler_ref: str
    kai_commit_hash: str | None
    kwok_node_count: int
    cluster_node_count: int | None
    test_focus: str
    timestamp: str
    service_resources: dict[str, Any]
    """Each KAI service's ``resources`` as the tuning profile writes them (KAI's config, copied)."""
    # Beyond the dashboard's fields (it ignores them): what really ran, read from the cluster.
    kubernetes_version: str | None
    kai_images: dict[str, list[str]]
    runner_image: str
    runner_image_ids: dict[str, str | None]


class ResultsTestEntry(JsonDocument):
    """An entry of ``results.tests``: the suite's own, or one naming a scenario that did not succeed."""

    test_name: str
    status: str
    """The suite's status as it wrote it, or the scenario's (``failure``, ``not_run``, ``skipped``)."""
    details: dict[str, Any] | None
    """The suite's own free-form fields, as it wrote them; or the scenario, the reason and its kind."""


class Results(JsonDocument):
    """The ``results`` block: the run's status, whose failure it was, and the test entries."""

    status: RunStatus
    failure_kind: FailureKind | None
    tests: tuple[ResultsTestEntry, ...]


class ResultsDocument(JsonDocument):
    """``results.json``; ``model_dump(mode="json")`` writes it key for key as the dashboard reads it."""

    metadata: RunMetadata
    results: Results
    # Runs published before profiles existed have no key, not null: so has a run without them.
    profiles: dict[str, ScenarioProfiles] | None = Field(
        default=None, exclude_if=lambda profiles: profiles is None
    )
    """Per scenario, its profiles; None, and no key, for a run published without them."""


class ManifestEntry(JsonDocument):
    """The run's entry in manifest.json; ``model_dump(mode="json")`` is what the manifest holds."""

    timestamp: str
    path: str
    """``results.json``'s key, relative to the bucket root, as the dashboard reads it."""
    commit: str
    """The KAI commit when the runner image reports it, else the KAI ref the run asked for."""
    run_id: str
    airflow_run_id: str
    node_count: int
    kai_ref: str
    status: RunStatus
    # Beyond the dashboard's fields (it ignores them): pass, failure, threshold, regression or
    # incomplete (verdicts.json), whose failure it was, the scenarios that failed or did not run.
    verdict: Verdict
    failure_kind: FailureKind | None
    """``scenario`` or ``infrastructure`` for a failed run, else None."""
    failed_scenarios: tuple[str, ...]
    """The scenarios that failed, so that the trend view finds a run by them from the manifest alone."""
    not_run_scenarios: tuple[str, ...]
    """The scenarios that did not run, likewise."""


def timestamp(moment: datetime) -> str:
    """ISO 8601 UTC with a ``Z``, as the dashboard's examples write it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ginkgo_focus(scenarios: Sequence[Scenario], selected: Sequence[str]) -> str:
    """The Ginkgo focus of the run: the selected suite scenarios' focuses as one alternation."""
    focuses = [
        s.run.focus for s in scenarios if s.name in selected and isinstance(s.run, GinkgoRun) and s.run.focus
    ]
    return "|".join(f"({focus})" if len(focuses) > 1 else focus for focus in focuses)


def service_resources(kai_tuning: Sequence[TuningPatch]) -> dict[str, Any]:
    """Each KAI service's requests and limits as the tuning profile (include/manifests/kai-tuning/) sets."""
    for change in kai_tuning:
        if change.kind == "Config":
            spec = change.patch.get("spec", {})
            return {
                service: spec[service]["service"]["resources"]
                for service in KAI_SERVICES
                if "resources" in spec.get(service, {}).get("service", {})
            }
    return {}


def commit_hash(entries: Sequence[ScenarioEntry]) -> str | None:
    """The KAI commit the runner image was built from, as the first runner that knows it reports."""
    for entry in entries:
        if entry.outcome and entry.outcome.kai_commit_hash:
            return entry.outcome.kai_commit_hash
    return None


def _tests(entry: ScenarioEntry) -> list[ResultsTestEntry]:
    tests = [
        ResultsTestEntry(test_name=t.test_name, status=t.status, details=t.details)
        for t in (entry.outcome.tests if entry.outcome else ())
    ]
    if entry.status != "success":
        kind = {"failure_kind": entry.failure_kind} if entry.failure_kind else {}
        tests.append(
            ResultsTestEntry(
                test_name=entry.scenario,
                status=entry.status,
                details={"scenario": entry.scenario, "message": entry.reason, **kind},
            )
        )
    return tests


def results_document(
    *, metadata: RunMetadata, entries: Sequence[ScenarioEntry], profiles: RunProfiles | None = None
) -> ResultsDocument:
    """``results.json``: ``{"metadata": {...}, "results": {"status", "failure_kind", "tests": [...]}}``.

    ``status`` is the run's (``run_summary.run_status``): ``success``, ``failure`` or ``incomplete``.
    With ``profiles`` (runs published before profiles existed have none), ``"profiles"``: per scenario,
    its ``ScenarioProfiles`` (each profile's summary and pprof file, or why it is missing).
    """
    return ResultsDocument(
        metadata=metadata,
        results=Results(
            status=run_status(entries),
            failure_kind=run_failure_kind(entries),
            tests=tuple(test for entry in entries for test in _tests(entry)),
        ),
        profiles=profiles.scenarios if profiles is not None else None,
    )


def manifest_entry(
    *,
    run_id: str,
    results_key: str,
    metadata: RunMetadata,
    status: RunStatus,
    airflow_run_id: str,
    verdict: Verdict,
    failure_kind: FailureKind | None,
    failed_scenarios: Sequence[str],
    not_run_scenarios: Sequence[str],
) -> ManifestEntry:
    """The run's entry in manifest.json, of its ``metadata`` and how it ended."""
    return ManifestEntry(
        timestamp=metadata.timestamp,
        path=results_key,
        commit=metadata.kai_commit_hash or metadata.kai_scheduler_ref,
        run_id=run_id,
        airflow_run_id=airflow_run_id,
        node_count=metadata.kwok_node_count,
        kai_ref=metadata.kai_scheduler_ref,
        status=status,
        verdict=verdict,
        failure_kind=failure_kind,
        failed_scenarios=tuple(failed_scenarios),
        not_run_scenarios=tuple(not_run_scenarios),
    )
