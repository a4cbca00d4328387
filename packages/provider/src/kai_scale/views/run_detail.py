"""The One run page: its scenarios, its test entries beside the previous run, its metrics. Pure.

Scenarios come from the run summary (``runs/<run-id>/run-summary.json``: every selected scenario,
successful ones too); test entries and their details from ``results.json``; the comparison, thresholds
and regressions from ``verdicts.json``, where each scenario is compared with its own previous run
(``previous_run_ids``; each comparison names its ``previous_run_id``); the Prometheus series from
``metrics.json``; each scenario's profiles of KAI's scheduler from ``results.json``'s ``profiles``
and their comparison with its previous run's from ``verdicts.json``'s ``profiles``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kai_scale.profiles.collection import (
    PPROF_SUFFIX,
    CollectedProfile,
    MissingProfile,
    ScenarioProfiles,
    profile_file,
)
from kai_scale.profiles.summary import ProfileSummary
from kai_scale.verdicts.document import ProfileVerdict
from kai_scale_model.validation import problems


@dataclass(frozen=True, kw_only=True)
class ScenarioRow:
    """One scenario of the run."""

    scenario: str
    """Its name."""
    status: str
    """``success``, ``failure``, ``not_run`` or ``skipped``."""
    reason: str | None
    """Why it failed, did not run or was skipped."""
    failure_kind: str | None
    """For a failure: ``scenario`` or ``infrastructure``; None otherwise, and in older summaries."""
    try_number: int | None
    """The task try whose outputs count."""
    tests: list[tuple[str, str, dict[str, Any]]]
    """Its test entries: (test name, status, details)."""
    compared: bool
    """Whether the verdicts compared it with an earlier run (not when it failed, did not run, was
    skipped, or the run has no verdicts)."""
    previous_run_id: str | None
    """The run it was compared with: the newest earlier one at the node count in which it produced
    results (None: none had, or it was not compared)."""


def scenario_rows(summary: Mapping[str, Any] | None, verdicts: Mapping[str, Any] | None) -> list[ScenarioRow]:
    """Each scenario of the run summary (none when the run has no summary), with its previous run."""
    previous = (verdicts or {}).get("previous_run_ids") or {}
    rows = []
    for entry in (summary or {}).get("scenarios") or []:
        scenario = str(entry.get("scenario"))
        rows.append(
            ScenarioRow(
                scenario=scenario,
                status=str(entry.get("status")),
                reason=entry.get("reason"),
                failure_kind=entry.get("failure_kind"),
                try_number=entry.get("try_number"),
                tests=[
                    (str(test.get("test_name")), str(test.get("status")), dict(test.get("details") or {}))
                    for test in (entry.get("outcome") or {}).get("tests") or []
                ],
                compared=scenario in previous,
                previous_run_id=_text(previous.get(scenario)),
            )
        )
    return rows


def _text(value: object) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True, kw_only=True)
class DetailRow:
    """One detail of one test entry, with what the verdicts found."""

    test_name: str
    """The test entry."""
    status: str
    """The test entry's status."""
    detail: str
    """The detail's name."""
    shown: str
    """Its value as written."""
    previous_shown: str
    """The previous comparable run's value, durations in seconds (``396 s``); empty without one."""
    previous_run_id: str | None
    """The run it was compared with (its scenario's previous run); None when it was not compared."""
    change_percent: float | None
    """Change against the previous run, in percent."""
    threshold: str | None
    """The threshold's verdict in a line, when one bounds this detail."""
    breach: bool
    """Whether the threshold was breached."""
    regression: str | None
    """The regression found, in a line."""


def _previous(value: float | None, *, duration: bool) -> str:
    # verdicts.json compares durations in seconds; the run's own value is shown as written.
    if value is None:
        return ""
    return f"{value:g} s" if duration else f"{value:g}"


def detail_rows(results: Mapping[str, Any] | None, verdicts: Mapping[str, Any] | None) -> list[DetailRow]:
    """Every detail of every test entry of ``results``, with its comparison and findings."""
    judged_tests = (verdicts or {}).get("tests") or {}
    # verdicts.json written before scenarios were compared each with its own run named one run for all.
    run_wide_previous = (verdicts or {}).get("previous_run_id")
    rows = []
    for test in ((results or {}).get("results") or {}).get("tests") or []:
        name = str(test.get("test_name"))
        for detail, raw in (test.get("details") or {}).items():
            judged = judged_tests.get(name, {}).get(detail) or {}
            comparison = judged.get("comparison") or {}
            threshold = judged.get("threshold")
            change = judged.get("change_point")
            rows.append(
                DetailRow(
                    test_name=name,
                    status=str(test.get("status")),
                    detail=str(detail),
                    shown="" if raw is None else str(raw),
                    previous_shown=_previous(comparison.get("previous"), duration=isinstance(raw, str)),
                    previous_run_id=(
                        _text(comparison.get("previous_run_id", run_wide_previous)) if comparison else None
                    ),
                    change_percent=comparison.get("change_percent"),
                    threshold=threshold.get("reason") if threshold else None,
                    breach=bool(threshold and threshold.get("status") == "breach"),
                    regression=change.get("reason") if change else None,
                )
            )
    return rows


@dataclass(frozen=True, kw_only=True)
class MetricChart:
    """One named query of one scenario, as a chart on the page (its series load when it is in view)."""

    scenario: str
    """The scenario whose window it covers."""
    name: str
    """The query's name (``kai_e2e_scheduling_latency_p99``)."""
    unit: str
    """Its unit (``ms``)."""
    description: str
    """What it measures."""
    status: str
    """``ok``, or ``missing`` with ``error`` saying why."""
    error: str | None
    """Why it is missing."""
    series_count: int
    """How many series it has."""


def metric_charts(metrics: Mapping[str, Any] | None) -> list[MetricChart]:
    """Every query of every scenario of ``metrics.json``, scenario by scenario."""
    return [
        MetricChart(
            scenario=str(scenario),
            name=str(name),
            unit=str(query.get("unit") or ""),
            description=str(query.get("description") or ""),
            status=str(query.get("status")),
            error=query.get("error"),
            series_count=len(query.get("series") or []),
        )
        for scenario, entry in ((metrics or {}).get("scenarios") or {}).items()
        for name, query in (entry.get("metrics") or {}).items()
    ]


def metric_series(metrics: Mapping[str, Any], *, scenario: str, name: str) -> dict[str, Any] | None:
    """One query's chart data: the scenario's window and each series' label and points; None if absent."""
    entry = (metrics.get("scenarios") or {}).get(scenario)
    query = ((entry or {}).get("metrics") or {}).get(name)
    if entry is None or query is None:
        return None
    return {
        "scenario": scenario,
        "name": name,
        "unit": query.get("unit") or "",
        "window": entry.get("window"),
        "series": [
            {
                "label": ", ".join(f"{key}={value}" for key, value in sorted((s.get("labels") or {}).items()))
                or name,
                # Prometheus' unix seconds as milliseconds, the time axis' unit.
                "points": [[time * 1000, value] for time, value in s.get("values") or []],
            }
            for s in query.get("series") or []
        ],
    }


@dataclass(frozen=True, kw_only=True)
class ProfileCard:
    """One profile of one scenario: its file, its total and its top functions, or why it is missing."""

    profile: str
    """Its type (``PROFILE_TYPES``): ``cpu``, ``alloc_space``, ``inuse_space``."""
    file_name: str
    """Its published file's name (``cpu.pb.gz``)."""
    summary: ProfileSummary | None
    """None: the profile is missing (``reason``)."""
    reason: str | None
    total: str
    """The total in its unit (``13.1 s of CPU``, ``512 MiB``); empty when missing."""


@dataclass(frozen=True, kw_only=True)
class ScenarioProfileRow:
    """One scenario's profiles of KAI's scheduler and their comparison with its previous run's."""

    scenario: str
    status: str
    """``collected``, ``partial``, ``missing``, or ``unreadable`` (the document's entry is not one)."""
    reason: str | None
    cards: list[ProfileCard]
    verdict: ProfileVerdict | None
    """The verdicts' comparison of its CPU profile (None: the run's verdicts have none for it)."""
    verdict_problem: str | None
    """Why the verdicts' entry for it cannot be read (None: it can, or there is none)."""


def _by_scenario(document: Mapping[str, Any] | None, what: str) -> tuple[Mapping[str, Any], str | None]:
    """The document's ``profiles`` by scenario, or nothing and why when they are not a mapping."""
    profiles = (document or {}).get("profiles")
    if profiles is None or isinstance(profiles, Mapping):
        return profiles or {}, None
    return {}, f"the {what}' profiles are not a mapping of scenarios but {type(profiles).__name__}"


def profile_rows(
    results: Mapping[str, Any] | None, verdicts: Mapping[str, Any] | None
) -> list[ScenarioProfileRow]:
    """Each scenario of ``results.json``'s profiles, with the verdicts' comparison; none for older runs.

    What is not what the pipeline writes (an entry edited by hand, or written by a newer pipeline) is
    shown as unreadable, naming what is wrong; the page still renders.
    """
    judged, verdicts_problem = _by_scenario(verdicts, "verdicts")
    entries, results_problem = _by_scenario(results, "results")
    if results_problem:
        return [
            ScenarioProfileRow(
                scenario="profiles",
                status="unreadable",
                reason=results_problem,
                cards=[],
                verdict=None,
                verdict_problem=None,
            )
        ]
    rows = []
    for scenario, raw in entries.items():
        verdict, verdict_problem = _profile_verdict(judged.get(scenario))
        status: str
        reason: str | None
        cards: list[ProfileCard] = []
        try:
            entry = ScenarioProfiles.model_validate(raw)
        except ValidationError as error:
            status, reason = "unreadable", f"the results' profiles entry is not one: {problems(error)}"
        else:
            status, reason = entry.status, entry.reason
            cards = [_card(name, profile) for name, profile in entry.profiles.items()]
        rows.append(
            ScenarioProfileRow(
                scenario=str(scenario),
                status=status,
                reason=reason,
                cards=cards,
                verdict=verdict,
                verdict_problem=verdicts_problem or verdict_problem,
            )
        )
    return rows


def _profile_verdict(raw: object) -> tuple[ProfileVerdict | None, str | None]:
    if raw is None:
        return None, None
    try:
        return ProfileVerdict.model_validate(raw), None
    except ValidationError as error:
        return None, f"the verdicts' profiles entry is not one: {problems(error)}"


def _card(name: str, profile: CollectedProfile | MissingProfile) -> ProfileCard:
    file_name = f"{name}{PPROF_SUFFIX}"
    if isinstance(profile, MissingProfile):
        return ProfileCard(profile=name, file_name=file_name, summary=None, reason=profile.reason, total="")
    return ProfileCard(
        profile=name,
        file_name=file_name,
        summary=profile.summary,
        reason=None,
        total=profile_amount(profile.summary),
    )


def profile_amount(summary: ProfileSummary) -> str:
    """A profile's total as a person reads it: CPU in seconds, bytes in KiB to GiB, else as counted."""
    if summary.cpu_seconds is not None:
        return f"{summary.cpu_seconds:.1f} s of CPU"
    if summary.unit == "bytes":
        amount = float(summary.total)
        for unit in ("B", "KiB", "MiB"):
            if amount < 1024:
                return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
            amount /= 1024
        return f"{amount:.1f} GiB"
    return f"{summary.total} {summary.unit}"


def collected_profile(
    results: Mapping[str, Any] | None, *, scenario: str, profile: str
) -> CollectedProfile | None:
    """A scenario's collected profile of that type, where the pipeline publishes it; None if there is none.

    An entry naming its file anywhere else is not served: the view reads only the run's own profiles.
    """
    entries, _ = _by_scenario(results, "results")
    try:
        entry = ScenarioProfiles.model_validate(entries[scenario]) if scenario in entries else None
    except ValidationError:
        return None
    found = entry.profiles.get(profile) if entry else None
    if isinstance(found, CollectedProfile) and found.file == profile_file(scenario, profile):
        return found
    return None
