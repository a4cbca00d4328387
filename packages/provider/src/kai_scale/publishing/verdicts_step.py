"""Judging a run before it is published: its history read from the bucket, the pure verdicts applied.

Reads the manifest, the ``results.json`` of the last comparable runs (same node count, published
successfully) and ``acknowledgements.json``; the maths is ``kai_scale.verdicts``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.object_keys import acknowledgements_key, manifest_key
from kai_scale.publishing.manifest import ManifestError, parse_manifest
from kai_scale.verdicts.acknowledgements import Acknowledgement, parse_acknowledgements
from kai_scale.verdicts.change_points import DEFAULT_METHOD, Method
from kai_scale.verdicts.comparison import compare_runs
from kai_scale.verdicts.directions import DetailRule, default_rule
from kai_scale.verdicts.document import verdicts_document
from kai_scale.verdicts.history import comparable_entries
from kai_scale.verdicts.regressions import HistoricRun, find_regressions
from kai_scale.verdicts.thresholds import ThresholdFinding, evaluate_thresholds
from kai_scale_model.scenario import Scenario

log = logging.getLogger(__name__)


def _history(
    bucket: ResultsBucketHook, *, prefix: str, run_id: str, node_count: int, method: Method
) -> list[HistoricRun]:
    text = bucket.read_text(manifest_key(prefix))
    try:
        manifest = parse_manifest(text, key=manifest_key(prefix)) if text else {"runs": []}
    except ManifestError as error:
        # Judged without history; publishing then refuses the manifest itself, saying so.
        log.warning("no history to judge run %s against: %s", run_id, error)
        return []
    runs = []
    for entry in comparable_entries(
        manifest, run_id=run_id, node_count=node_count, last=method.window + method.max_tail
    ):
        results = bucket.read_text(str(entry.get("path", "")))
        try:
            tests = json.loads(results)["results"]["tests"] if results else None
        except (json.JSONDecodeError, KeyError, TypeError):
            tests = None
        if tests is None:
            # A lost or unreadable run is a gap in the history, not a reason to judge nothing.
            log.warning(
                "run %s: results.json at %s unreadable, left out of the history",
                entry.get("run_id"),
                entry.get("path"),
            )
            continue
        runs.append(HistoricRun(run_id=str(entry["run_id"]), tests=tests))
    return runs


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
            better=rule.better or default_rule(rule.detail).better, min_change=rule.min_change
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
    include_dir: str,
    method: Method = DEFAULT_METHOD,
) -> dict[str, Any]:
    """``verdicts.json`` of the run whose test entries are ``tests``; ``scenarios``' thresholds applied.

    :param scenarios: the scenarios that ran to success (their thresholds are evaluated, their
        ``detail_rules`` judge their details' regressions).
    """
    history = _history(bucket, prefix=prefix, run_id=run_id, node_count=node_count, method=method)
    regressions = find_regressions(
        run_id=run_id,
        node_count=node_count,
        tests=tests,
        history=history,
        acknowledgements=_acknowledgements(bucket, prefix=prefix),
        method=method,
        rules=detail_rules(scenarios),
    )
    previous = history[-1] if history else None
    return verdicts_document(
        run_id=run_id,
        node_count=node_count,
        tests=tests,
        thresholds=_thresholds(scenarios, tests, include_dir),
        regressions=regressions,
        comparison=compare_runs(current=tests, previous=previous.tests if previous else None),
        previous_run_id=previous.run_id if previous else None,
        method=method,
    )
