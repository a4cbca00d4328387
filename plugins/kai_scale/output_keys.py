"""Where a scenario's outputs live in the results bucket. Pure: a function of run, scenario and try."""

from __future__ import annotations

from dataclasses import dataclass

# What a runner pod uploads; the runner names them the same way (kai_scale.runner.cli).
OUTPUT_NAMES = ("result", "report")
RUNS_PREFIX = "runs/"


@dataclass(frozen=True, kw_only=True)
class ScenarioOutputs:
    """The object keys of one try of one scenario."""

    result: str
    """The runner's ``result.json``."""
    report: str
    """The suite's Ginkgo JSON report (ginkgo scenarios only)."""

    def by_name(self) -> dict[str, str]:
        """Keys by output name."""
        return {"result": self.result, "report": self.report}


def scenario_outputs(*, run_id: str, scenario: str, try_number: int) -> ScenarioOutputs:
    """Keys under ``runs/<run-id>/scenarios/<scenario>/try-<n>/``.

    Each try writes its own objects, so a late write of a failed try can never overwrite its retry's;
    the task records which try counts.
    """
    base = f"{RUNS_PREFIX}{run_id}/scenarios/{scenario}/try-{try_number}"
    return ScenarioOutputs(result=f"{base}/result.json", report=f"{base}/report.json")


def run_summary_key(run_id: str) -> str:
    """The run's summary of scenario outcomes, written at the end of the DAG."""
    return f"{RUNS_PREFIX}{run_id}/summary.json"


def run_metrics_key(run_id: str) -> str:
    """The metrics collected for the run's scenarios, written by the metrics task."""
    return f"{RUNS_PREFIX}{run_id}/metrics.json"


@dataclass(frozen=True, kw_only=True)
class PublishedKeys:
    """The objects a published run consists of, under ``<prefix><run-id>/``."""

    results: str
    """``results.json``, in the dashboard's schema (the manifest entry's ``path``)."""
    report: str
    """``report.json``, the scenarios' Ginkgo reports merged."""
    metrics: str
    """``metrics.json``, per scenario."""


def published_keys(*, prefix: str, run_id: str) -> PublishedKeys:
    """Keys of a published run, e.g. ``Public/<run-id>/results.json``."""
    base = f"{prefix}{run_id}"
    return PublishedKeys(
        results=f"{base}/results.json", report=f"{base}/report.json", metrics=f"{base}/metrics.json"
    )


def manifest_key(prefix: str) -> str:
    """The dashboard's index of runs, ``<prefix>manifest.json``."""
    return f"{prefix}manifest.json"
