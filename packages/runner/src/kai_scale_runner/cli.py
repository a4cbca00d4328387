"""``kai-scale-runner``: what a runner pod executes. Runs one scenario and uploads its outputs.

Inputs come from the environment the task sets on the pod (``kai_scale_model.runner_interface``):
the scenario (JSON), the node count, the run id, the upload URLs (output name -> presigned PUT URL) and
the pod's namespace.
Exit status: 0 when the scenario succeeded, 1 when it failed, 2 on bad input, 3 when it did not run
(a scenario that needs KAI, on a cluster whose KAI is missing or not ready).
The last line it prints is the scenario's verdict (the pod's termination message).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from kai_scale_model import runner_interface as interface
from kai_scale_model.outcome import ScenarioOutcome
from kai_scale_model.scenario import GinkgoRun, Scenario
from kai_scale_runner import ginkgo, uploads

log = logging.getLogger(__name__)

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


def _kai_not_ready_reason() -> str | None:
    from kubernetes import client, config  # noqa: PLC0415 - only scenarios that need KAI talk to the API here

    config.load_config()
    from kai_scale_runner.kai_detection import kai_not_ready_reason  # noqa: PLC0415

    api_client = client.ApiClient()
    return kai_not_ready_reason(
        extensions=client.ApiextensionsV1Api(api_client), core=client.CoreV1Api(api_client)
    )


def run_scenario(
    *, scenario: Scenario, node_count: int, run_id: str, namespace: str, workdir: Path
) -> ScenarioOutcome:
    """Run the scenario and describe how it ended; never raises for a scenario's own failure."""
    started = _now()
    if scenario.needs_kai:
        not_ready = _kai_not_ready_reason()
        if not_ready:
            return ScenarioOutcome(
                scenario=scenario.name,
                kind=scenario.kind,
                status="not_run",
                reason=not_ready,
                started_at=started,
                finished_at=_now(),
            )
    if isinstance(scenario.run, GinkgoRun):
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
            failure_kind=verdict.failure_kind,
        )
    from kai_scale_runner.workload import run_workload  # noqa: PLC0415 - asyncio client only for workloads

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
        failure_kind=None if result.all_scheduled else "scenario",
    )


def _remove_workload_pods(*, scenario: Scenario, namespace: str, run_id: str) -> None:
    from kai_scale_runner.workload import remove_workload_pods  # noqa: PLC0415 - asyncio client only here

    try:
        remove_workload_pods(scenario=scenario, namespace=namespace, run_id=run_id)
    except Exception as error:  # the outcome is uploaded: teardown removes the pods by their labels
        log.warning("removing the workload pods failed (teardown removes them by label): %s", error)
    else:
        log.info("workload pods removed")


def _inputs() -> tuple[Scenario, int, str, str, dict[str, str]]:
    try:
        scenario = Scenario.model_validate_json(os.environ.get(interface.SCENARIO_ENV, ""))
    except ValidationError as error:
        raise ValueError(f"{interface.SCENARIO_ENV} is not a valid scenario: {error}") from error
    raw_count = os.environ.get(interface.NODE_COUNT_ENV, "")
    if not raw_count.isdigit() or not 1 <= int(raw_count) <= 10_000:
        raise ValueError(f"{interface.NODE_COUNT_ENV} must be an integer from 1 to 10000, got {raw_count!r}")
    run_id = os.environ.get(interface.RUN_ID_ENV) or "manual"
    namespace = os.environ.get(interface.NAMESPACE_ENV) or "default"
    return (
        scenario,
        int(raw_count),
        run_id,
        namespace,
        # Taken out of the environment: the suite and anything else started here never see them.
        uploads.parse_output_urls(os.environ.pop(interface.OUTPUT_URLS_ENV, None)),
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``kai-scale-runner`` command."""
    parser = argparse.ArgumentParser(
        prog="kai-scale-runner", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "command", choices=["run"], help=f"run the scenario given in {interface.SCENARIO_ENV}"
    )
    parser.add_argument("--workdir", type=Path, default=None, help="where the suite writes its files")
    options = parser.parse_args(argv)
    # Plain lines on stdout: the pod's log, whose last line is its termination message.
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout, force=True)
    try:
        scenario, node_count, run_id, namespace, urls = _inputs()
    except ValueError as error:
        log.error("kai-scale-runner: bad input: %s", error)
        return 2
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="kai-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    log.info("scenario %s (%s) on %s nodes, run %s", scenario.name, scenario.kind, node_count, run_id)
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
            failure_kind="infrastructure",
        )
    outcome = dataclasses.replace(outcome, kai_commit_hash=kai_commit_hash())
    (workdir / interface.output_file(interface.OUTCOME)).write_text(outcome.to_json())
    files = {name: workdir / interface.output_file(name) for name in interface.OUTPUTS}
    try:
        uploaded = uploads.upload_all(files=files, urls=urls)
    except uploads.UploadError as error:
        log.error("scenario %s: failure: outputs not uploaded: %s", scenario.name, error)
        return 1
    log.info("uploaded outputs: %s", ", ".join(uploaded))
    if not isinstance(scenario.run, GinkgoRun):
        # After the upload: a slow removal must never cost the measurement.
        _remove_workload_pods(scenario=scenario, namespace=namespace, run_id=run_id)
    verdict = f"scenario {scenario.name}: {outcome.status}" + (
        f": {outcome.reason}" if outcome.reason else ""
    )
    log.info("%s", verdict)
    if outcome.status == "not_run":
        return interface.NOT_RUN_EXIT_CODE
    return 1 if outcome.status == "failure" else 0


if __name__ == "__main__":
    sys.exit(main())
