"""Judging a run before it is published: its history read from the bucket, the pure verdicts applied.

Reads the manifest, the ``results.json`` of the last runs at the same node count (the successful ones
are the history; each scenario is compared with the newest in which it produced results, and so is
its CPU profile of KAI's scheduler) and ``acknowledgements.json``; the maths is ``kai_scale.verdicts``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.metrics.collection import pods_bound
from kai_scale.object_keys import acknowledgements_key, published_keys_beside, run_file_key
from kai_scale.profiles.collection import CPU_PROFILE, CollectedProfile, RunProfiles
from kai_scale.profiles.pprof import Profile, ProfileError, decode_profile
from kai_scale.publishing.manifest import ManifestError, empty_manifest
from kai_scale.publishing.published_history import read_manifest, read_run
from kai_scale.verdicts.acknowledgements import Acknowledgement, parse_acknowledgements
from kai_scale.verdicts.change_points import DEFAULT_METHOD, Method
from kai_scale.verdicts.comparison import compare_runs
from kai_scale.verdicts.directions import DetailRule, default_rule
from kai_scale.verdicts.document import Verdicts, verdicts_document, with_profiles
from kai_scale.verdicts.history import HistoricRun, comparable_entries, earlier_entries, previous_runs
from kai_scale.verdicts.profile_comparison import ProfileComparison, compare_cpu_profiles
from kai_scale.verdicts.regressions import find_regressions
from kai_scale.verdicts.thresholds import ThresholdFinding, evaluate_thresholds
from kai_scale_model.scenario import Scenario

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class _EarlierRuns:
    """The runs at the node count before the one being judged, each read once."""

    judged_against: list[HistoricRun]
    """The last successful runs: the history the details are judged against."""
    compared_with: list[HistoricRun]
    """The last runs whatever their status: where each scenario's previous run is looked for."""
    results_keys: dict[str, str]
    """Each run's ``results.json`` (its manifest entry's path), by run id: its files sit beside it."""


def _earlier_runs(
    bucket: ResultsBucketHook, *, prefix: str, run_id: str, node_count: int, method: Method
) -> _EarlierRuns:
    try:
        manifest = read_manifest(bucket, prefix=prefix) or empty_manifest()
    except ManifestError as error:
        # Judged without history; publishing then refuses the manifest itself, saying so.
        log.warning("no history to judge run %s against: %s", run_id, error)
        manifest = empty_manifest()
    last = method.window + method.max_tail
    read: dict[str, HistoricRun | None] = {}

    def runs(entries: list[dict[str, Any]]) -> list[HistoricRun]:
        # Most nights both lists hold the same runs. A lost or unreadable run is a gap in the history,
        # not a reason to judge nothing.
        for entry in entries:
            path = str(entry.get("path", ""))
            if path not in read:
                read[path] = read_run(bucket, entry)
        return [run for entry in entries if (run := read[str(entry.get("path", ""))]) is not None]

    compared = earlier_entries(manifest, run_id=run_id, node_count=node_count)[-last:]
    return _EarlierRuns(
        judged_against=runs(comparable_entries(manifest, run_id=run_id, node_count=node_count, last=last)),
        compared_with=runs(compared),
        results_keys={str(entry.get("run_id")): str(entry.get("path", "")) for entry in compared},
    )


def _cpu_profile(bucket: ResultsBucketHook, key: str, whose: str) -> Profile | str:
    """The CPU profile at ``key``, or why there is none."""
    data = bucket.read_bytes(key)
    if data is None:
        return f"{whose} has no CPU profile ({key})"
    try:
        return decode_profile(data)
    except ProfileError as error:
        return f"{whose}'s CPU profile ({key}) is unreadable: {error}"


def _published_pods_bound(bucket: ResultsBucketHook, results_key: str, scenario: str) -> int | None:
    """The pods bound in ``scenario``'s window of the run published at ``results_key`` (None: unknown)."""
    text = bucket.read_text(published_keys_beside(results_key).metrics)
    try:
        document = json.loads(text) if text else None
    except json.JSONDecodeError:
        return None  # a lost or truncated metrics.json: the comparison goes on without pods
    scenarios = document.get("scenarios") if isinstance(document, dict) else None
    return pods_bound(scenarios.get(scenario)) if isinstance(scenarios, dict) else None


def _profile_comparisons(
    bucket: ResultsBucketHook,
    *,
    run_id: str,
    previous: Mapping[str, HistoricRun | None],
    earlier: _EarlierRuns,
    profiles: RunProfiles,
    run_pods: Mapping[str, int | None],
) -> dict[str, ProfileComparison | str]:
    """Each scenario's CPU profile against its previous comparable run's, or why it is not compared.

    The run's profile is the one its profiles document says was collected (a file of an earlier try
    is not); the previous run's, the one published beside its results.json.
    """
    comparisons: dict[str, ProfileComparison | str] = {}
    for scenario, before in previous.items():
        entry = profiles.scenarios.get(scenario)
        cpu = entry.profiles.get(CPU_PROFILE) if entry else None
        results_key = earlier.results_keys.get(before.run_id) if before else None
        if not isinstance(cpu, CollectedProfile):
            why = cpu.reason if cpu else "no profiles entry"
            comparisons[scenario] = f"this run's CPU profile was not collected: {why}"
            continue
        if before is None or results_key is None:
            comparisons[scenario] = "no previous comparable run with published results"
            continue
        run = _cpu_profile(bucket, run_file_key(run_id, cpu.file), "this run")
        baseline = _cpu_profile(
            bucket, published_keys_beside(results_key).beside(cpu.file), f"run {before.run_id}"
        )
        if isinstance(run, str) or isinstance(baseline, str):
            comparisons[scenario] = run if isinstance(run, str) else str(baseline)
            continue
        try:
            comparisons[scenario] = compare_cpu_profiles(
                run=run,
                baseline=baseline,
                baseline_run_id=before.run_id,
                run_pods=run_pods.get(scenario),
                baseline_pods=_published_pods_bound(bucket, results_key, scenario),
            )
        except ProfileError as error:
            comparisons[scenario] = f"not comparable: {error}"
    return comparisons


def _acknowledgements(bucket: ResultsBucketHook, *, prefix: str) -> list[Acknowledgement]:
    key = acknowledgements_key(prefix)
    text = bucket.read_text(key)
    return parse_acknowledgements(text, key=key) if text else []


def _thresholds(
    scenarios: Sequence[Scenario], tests: Sequence[Mapping[str, Any]], include_dir: str
) -> list[ThresholdFinding]:
    findings = []
    for scenario in scenarios:
        findings += evaluate_thresholds(
            thresholds=[threshold.model_dump() for threshold in scenario.thresholds],
            tests=tests,
            where=f"{include_dir}/scenarios/{scenario.name}.yaml",
        )
    return findings


def detail_rules(scenarios: Sequence[Scenario]) -> dict[tuple[str, str], DetailRule]:
    """The scenarios' ``detail_rules:`` by (test name, detail); an unset ``better`` is the default's."""
    return {
        (rule.test_name, rule.detail): DetailRule(
            better=rule.better or default_rule(rule.detail).better,
            min_change=rule.min_change,
            judge=rule.judge,
        )
        for scenario in scenarios
        for rule in scenario.detail_rules
    }


def judge_run(
    bucket: ResultsBucketHook,
    *,
    prefix: str,
    run_id: str,
    node_count: int,
    scenarios: Sequence[Scenario],
    tests: Sequence[Mapping[str, Any]],
    scenario_tests: Mapping[str, Sequence[Mapping[str, Any]]],
    include_dir: str,
    profiles: RunProfiles,
    run_pods: Mapping[str, int | None],
    rules: Mapping[tuple[str, str], DetailRule] | None = None,
    method: Method = DEFAULT_METHOD,
) -> Verdicts:
    """``verdicts.json`` of the run whose test entries are ``tests``; ``scenarios``' thresholds applied.

    :param scenarios: the scenarios that ran to success (their thresholds are evaluated).
    :param scenario_tests: each scenario's own test entries (compared with its previous run).
    :param profiles: the run's profiles document (its CPU profiles are compared with the previous run's).
    :param run_pods: each scenario's pods bound in its window (``pods_bound``; None: unknown).
    :param rules: how each detail's regressions are judged; by default ``scenarios``' ``detail_rules``
        (pass every scenario's: a failed scenario's entries are judged by its rules too).
    """
    earlier = _earlier_runs(bucket, prefix=prefix, run_id=run_id, node_count=node_count, method=method)
    regressions = find_regressions(
        run_id=run_id,
        node_count=node_count,
        tests=tests,
        history=earlier.judged_against,
        acknowledgements=_acknowledgements(bucket, prefix=prefix),
        method=method,
        rules=detail_rules(scenarios) if rules is None else rules,
    )
    previous = previous_runs(scenario_tests, earlier=earlier.compared_with)
    verdicts = verdicts_document(
        run_id=run_id,
        node_count=node_count,
        tests=tests,
        thresholds=_thresholds(scenarios, tests, include_dir),
        regressions=regressions,
        comparison=[
            row
            for scenario, own in scenario_tests.items()
            for row in compare_runs(current=own, previous=previous[scenario])
        ],
        previous_run_ids={scenario: run.run_id if run else None for scenario, run in previous.items()},
        method=method,
    )
    return with_profiles(
        verdicts,
        comparisons=_profile_comparisons(
            bucket, run_id=run_id, previous=previous, earlier=earlier, profiles=profiles, run_pods=run_pods
        ),
        scenario_tests={
            scenario: [str(t["test_name"]) for t in own] for scenario, own in scenario_tests.items()
        },
    )
