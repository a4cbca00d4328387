"""Which published runs a run is judged and compared against: runs of the same node count. Pure."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class HistoricRun:
    """One earlier published run of the same node count."""

    run_id: str
    """Its run id (from the manifest)."""
    tests: Sequence[Mapping[str, Any]]
    """Its results.json ``results.tests``."""


def earlier_entries(
    manifest: Mapping[str, Any], *, node_count: int, run_id: str | None = None
) -> list[dict[str, Any]]:
    """Manifest entries of ``node_count`` published before ``run_id`` (None: all), oldest first.

    Whatever their status. Ordered by timestamp (run ids sort by time too); a run that is not yet in
    the manifest (judged before its entry is written) is compared with every entry.
    """
    runs = [
        run
        for run in manifest.get("runs", [])
        if isinstance(run, dict) and run.get("node_count") == node_count
    ]
    if run_id is not None:
        own = next((run for run in runs if run.get("run_id") == run_id), None)
        runs = [
            run
            for run in runs
            if run.get("run_id") != run_id
            and (own is None or str(run.get("timestamp", "")) < str(own.get("timestamp", "")))
        ]
    return sorted(runs, key=lambda run: (str(run.get("timestamp", "")), str(run.get("run_id", ""))))


def comparable_entries(
    manifest: Mapping[str, Any], *, node_count: int, run_id: str | None = None, last: int | None = None
) -> list[dict[str, Any]]:
    """The successful ones of ``earlier_entries``: the history details are judged and calibrated on.

    Failed and incomplete runs are left out: their details are partial. ``last`` keeps only the
    newest so many.
    """
    successful = [
        run
        for run in earlier_entries(manifest, node_count=node_count, run_id=run_id)
        if run.get("status") == "success"
    ]
    return successful[-last:] if last else successful


def produced_results(run: HistoricRun, *, scenario: str, test_names: Collection[str]) -> bool:
    """Whether ``scenario`` produced results in ``run``: one of its tests is there and it did not fail.

    A scenario that failed, did not run or was skipped has an entry of its own in results.json, named
    after it (``kai_scale.publishing.results_document``); ``test_names`` are the scenario's tests in
    the run being compared.
    """
    entries = [(test.get("test_name"), (test.get("details") or {}).get("scenario")) for test in run.tests]
    return (scenario, scenario) not in entries and any(name in test_names for name, _ in entries)


def previous_runs(
    scenario_tests: Mapping[str, Sequence[Mapping[str, Any]]], *, earlier: Sequence[HistoricRun]
) -> dict[str, HistoricRun | None]:
    """Each scenario's previous comparable run: the newest of ``earlier`` it produced results in.

    :param scenario_tests: each scenario's test entries in the run being compared.
    :param earlier: the runs before it at its node count, oldest first.
    """
    return {
        scenario: next(
            (
                run
                for run in reversed(earlier)
                if produced_results(run, scenario=scenario, test_names={str(t["test_name"]) for t in tests})
            ),
            None,
        )
        for scenario, tests in scenario_tests.items()
    }
