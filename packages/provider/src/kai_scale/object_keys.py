"""Where a run's objects live in the results bucket. Pure: a function of run, scenario and try.

The names are the glossary of docs/results.md: per try the runner's ``outcome.json``,
``ginkgo-report.json`` and ``kwok_scale_test.json``; per run the ``run-summary.json``, ``metrics.json``,
``profiles.json`` and the profiles' pprof files under ``runs/``; published, ``results.json``,
``ginkgo-report.json``, ``metrics.json`` and the pprof files under the public prefix, indexed by
``manifest.json``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_scale_model.runner_interface import GINKGO_REPORT, OUTCOME, SUITE_RESULTS, output_file

RUNS_PREFIX = "runs/"


@dataclass(frozen=True, kw_only=True)
class ScenarioOutputs:
    """The object keys of one try of one scenario."""

    outcome: str
    """The runner's ``outcome.json``."""
    ginkgo_report: str
    """The suite's ``ginkgo-report.json`` (suite scenarios only)."""
    suite_results: str
    """The suite's ``kwok_scale_test.json`` as it wrote it (suite scenarios only)."""

    def by_name(self) -> dict[str, str]:
        """Keys by output name (``kai_scale_model.runner_interface``)."""
        return {OUTCOME: self.outcome, GINKGO_REPORT: self.ginkgo_report, SUITE_RESULTS: self.suite_results}


def scenario_outputs(*, run_id: str, scenario: str, try_number: int) -> ScenarioOutputs:
    """Keys under ``runs/<run-id>/scenarios/<scenario>/try-<n>/``.

    Each try writes its own objects, so a late write of a failed try can never overwrite its retry's;
    the task records which try counts.
    """
    base = f"{RUNS_PREFIX}{run_id}/scenarios/{scenario}/try-{try_number}"
    return ScenarioOutputs(
        outcome=f"{base}/{output_file(OUTCOME)}",
        ginkgo_report=f"{base}/{output_file(GINKGO_REPORT)}",
        suite_results=f"{base}/{output_file(SUITE_RESULTS)}",
    )


def run_summary_key(run_id: str) -> str:
    """The run summary (every scenario's entry), written by the publishing task."""
    return f"{RUNS_PREFIX}{run_id}/run-summary.json"


def run_metrics_key(run_id: str) -> str:
    """The run's metrics, written by the metrics task and published as they are."""
    return f"{RUNS_PREFIX}{run_id}/metrics.json"


def run_profiles_key(run_id: str) -> str:
    """The run's profiles document, written by the metrics task; published inside ``results.json``."""
    return f"{RUNS_PREFIX}{run_id}/profiles.json"


def run_file_key(run_id: str, file: str) -> str:
    """A file of the run's folder under ``runs/``, such as a profile (``profiles/<scenario>/cpu.pb.gz``)."""
    return f"{RUNS_PREFIX}{run_id}/{file}"


@dataclass(frozen=True, kw_only=True)
class PublishedKeys:
    """The objects a published run consists of, under ``<prefix><run-id>/``."""

    results: str
    """``results.json``, the results document in the dashboard's schema (the manifest entry's ``path``)."""
    ginkgo_report: str
    """``ginkgo-report.json``, the scenarios' Ginkgo reports merged."""
    metrics: str
    """``metrics.json``, per scenario."""
    verdicts: str
    """``verdicts.json``: thresholds, change points and the comparison with the previous run."""

    def beside(self, file: str) -> str:
        """A file of the published run's folder, such as a profile (``profiles/<scenario>/cpu.pb.gz``)."""
        folder, _, _ = self.results.rpartition("/")
        return f"{folder}/{file}" if folder else file


def published_keys(*, prefix: str, run_id: str) -> PublishedKeys:
    """Keys of a published run, e.g. ``Public/<run-id>/results.json``."""
    base = f"{prefix}{run_id}"
    return PublishedKeys(
        results=f"{base}/results.json",
        ginkgo_report=f"{base}/ginkgo-report.json",
        metrics=f"{base}/metrics.json",
        verdicts=f"{base}/verdicts.json",
    )


def published_keys_beside(results_key: str) -> PublishedKeys:
    """The keys of the run whose ``results.json`` is ``results_key`` (a manifest entry's ``path``).

    Its objects sit beside it, whatever prefix the run was published under.
    """
    folder, _, _ = results_key.rpartition("/")
    base = f"{folder}/" if folder else ""
    return PublishedKeys(
        results=results_key,
        ginkgo_report=f"{base}ginkgo-report.json",
        metrics=f"{base}metrics.json",
        verdicts=f"{base}verdicts.json",
    )


def acknowledgements_key(prefix: str) -> str:
    """Change points people acknowledged, ``<prefix>acknowledgements.json`` (written by people)."""
    return f"{prefix}acknowledgements.json"


def manifest_key(prefix: str) -> str:
    """The dashboard's index of runs, ``<prefix>manifest.json``."""
    return f"{prefix}manifest.json"
