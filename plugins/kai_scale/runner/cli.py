"""``kai-scale-runner``: what a runner pod executes. Runs one scenario and uploads its outputs.

Inputs come from the environment the task sets on the pod:
``KAI_SCALE_SCENARIO`` (the scenario, JSON), ``NODE_COUNT``, ``KAI_SCALE_RUN_ID``,
``KAI_SCALE_OUTPUT_URLS`` (output name -> presigned PUT URL) and ``POD_NAMESPACE``.
Exit status: 0 when the scenario succeeded or was skipped, 1 when it failed, 2 on bad input.
The last line it prints is the scenario's verdict (the pod's termination message).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from kai_scale.outcome import ScenarioOutcome
from kai_scale.runner import ginkgo, outputs
from kai_scale.scenarios.model import GinkgoRun, Scenario

RESULT_FILE = "result.json"
# Written by the runner image's build (docker/runner/Dockerfile): the commit KAI_REF resolved to.
KAI_COMMIT_FILE = Path("/etc/kai-scale/kai-commit")


def kai_commit_hash() -> str | None:
    """``KAI_COMMIT_HASH`` if set, else the commit recorded in the image, else None."""
    from_env = os.environ.get("KAI_COMMIT_HASH", "").strip()
    if from_env:
        return from_env
    try:
        return KAI_COMMIT_FILE.read_text().strip() or None
    except OSError:
        return None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _kai_missing_reason() -> str | None:
    from kubernetes import client, config  # noqa: PLC0415 - only ginkgo scenarios talk to the API here

    config.load_config()
    from kai_scale.runner.kai_detection import kai_missing_reason  # noqa: PLC0415

    return kai_missing_reason(client.ApiClient())


def run_scenario(
    *, scenario: Scenario, node_count: int, run_id: str, namespace: str, workdir: Path
) -> ScenarioOutcome:
    """Run the scenario and describe how it ended; never raises for a scenario's own failure."""
    started = _now()
    if isinstance(scenario.run, GinkgoRun):
        missing = _kai_missing_reason()
        if missing:
            return ScenarioOutcome(
                scenario=scenario.name,
                kind="ginkgo",
                status="skipped",
                reason=missing,
                started_at=started,
                finished_at=_now(),
            )
        exit_code, verdict = ginkgo.run_suite(
            scenario=scenario, run=scenario.run, node_count=node_count, workdir=workdir
        )
        return ScenarioOutcome(
            scenario=scenario.name,
            kind="ginkgo",
            status=verdict.status,
            reason=verdict.reason,
            started_at=started,
            finished_at=_now(),
            exit_code=exit_code,
            tests=verdict.tests,
        )
    from kai_scale.runner.workload import run_workload  # noqa: PLC0415 - asyncio client only for workloads

    result = run_workload(
        scenario=scenario, run=scenario.run, node_count=node_count, namespace=namespace, run_id=run_id
    )
    return ScenarioOutcome(
        scenario=scenario.name,
        kind="workload",
        status="success" if result.all_scheduled else "failure",
        reason=None
        if result.all_scheduled
        else (
            f"only {result.test.details['scheduled pods']} of {result.test.details['pods']} pods "  # type: ignore[index]
            "were scheduled before the deadline"
        ),
        started_at=started,
        finished_at=_now(),
        tests=(result.test,),
    )


def _inputs() -> tuple[Scenario, int, str, str, dict[str, str]]:
    try:
        scenario = Scenario.model_validate_json(os.environ.get("KAI_SCALE_SCENARIO", ""))
    except ValidationError as error:
        raise ValueError(f"KAI_SCALE_SCENARIO is not a valid scenario: {error}") from error
    raw_count = os.environ.get("NODE_COUNT", "")
    if not raw_count.isdigit() or not 1 <= int(raw_count) <= 10_000:
        raise ValueError(f"NODE_COUNT must be an integer from 1 to 10000, got {raw_count!r}")
    run_id = os.environ.get("KAI_SCALE_RUN_ID") or "manual"
    namespace = os.environ.get("POD_NAMESPACE") or "default"
    return (
        scenario,
        int(raw_count),
        run_id,
        namespace,
        outputs.parse_output_urls(os.environ.get("KAI_SCALE_OUTPUT_URLS")),
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``kai-scale-runner`` command."""
    parser = argparse.ArgumentParser(
        prog="kai-scale-runner", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=["run"], help="run the scenario given in KAI_SCALE_SCENARIO")
    parser.add_argument("--workdir", type=Path, default=None, help="where the suite writes its files")
    options = parser.parse_args(argv)
    try:
        scenario, node_count, run_id, namespace, urls = _inputs()
    except ValueError as error:
        print(f"kai-scale-runner: bad input: {error}", flush=True)
        return 2
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="kai-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"scenario {scenario.name} ({scenario.kind}) on {node_count} nodes, run {run_id}", flush=True)
    started_at = _now()
    try:
        outcome = run_scenario(
            scenario=scenario, node_count=node_count, run_id=run_id, namespace=namespace, workdir=workdir
        )
    except Exception as error:  # the scenario crashed: still report it, with what went wrong
        outcome = ScenarioOutcome(
            scenario=scenario.name,
            kind=scenario.kind,
            status="failure",
            reason=f"the runner crashed: {type(error).__name__}: {error}",
            started_at=started_at,  # the metrics window covers what ran before the crash
            finished_at=_now(),
        )
    outcome = dataclasses.replace(outcome, kai_commit_hash=kai_commit_hash())
    (workdir / RESULT_FILE).write_text(outcome.to_json())
    # result.json last: once it is there, the outputs it describes are too.
    files = {"report": workdir / ginkgo.REPORT_FILE, "result": workdir / RESULT_FILE}
    try:
        uploaded = outputs.upload_all(files=files, urls=urls)
    except outputs.UploadError as error:
        print(f"scenario {scenario.name}: failure: outputs not uploaded: {error}", flush=True)
        return 1
    print(f"uploaded outputs: {', '.join(uploaded)}", flush=True)
    verdict = f"scenario {scenario.name}: {outcome.status}" + (
        f": {outcome.reason}" if outcome.reason else ""
    )
    print(verdict, flush=True)
    return 1 if outcome.status == "failure" else 0


if __name__ == "__main__":
    sys.exit(main())
