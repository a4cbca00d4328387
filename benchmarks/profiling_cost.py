"""What profiling costs KAI's scheduler: sanity-fill-cluster's fill times with and without the push.

Usage: ``.venv/bin/python benchmarks/profiling_cost.py [--node-count 100] [--runs 3]`` with the local
environment up, or ``--read PROFILE=RUN_ID ...`` to read finished runs of the deployment instead of
starting any.

Runs the nightly DAG with ``sanity-fill-cluster`` alone on the chart-deployed Airflow (localenv.airflow,
as ``make demo`` deploys it), ``--runs`` times under each of two tuning profiles: ``local``, whose
scheduler pushes its profiles to Pyroscope, and ``local-unprofiled``, whose scheduler starts no Pyroscope
agent. They alternate as A B B A A B…, so that a drift of the machine over the sitting weighs on both
alike. The tuning profile is a release setting (``KAI_SCALE_KAI_TUNING_PROFILE``): each switch upgrades
the release, and the run's ``tune_kai`` rolls KAI's scheduler out with the other arguments.

Reports each run's two fill times as KAI's suite measured them (FILL_TESTS), their mean and standard
deviation under each profile, and profiling's cost: the profiled mean over the unprofiled one, less 1.

It publishes into a bucket of its own (task logs included), removed at the end: the environment's
history is untouched. The release is upgraded to point at that bucket, and back by the next deploy.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from kai_scale_model.durations import parse_duration
from localenv.airflow import AirflowDeployment
from localenv.airflow_api import AirflowApi
from localenv.airflow_values import Overrides
from localenv.demo import follow, run_path, run_summary, trigger, wait_for_dag
from localenv.environment import LocalEnvironment
from localenv.settings import Settings

SCENARIO = "sanity-fill-cluster"
PROFILED, UNPROFILED = "local", "local-unprofiled"
# The suite's two measurements of one fill: its test names, and what each measures.
FILL_TESTS = {
    "Fill Cluster with single GPU Jobs": "fill, jobs created with the scheduler off (s)",
    "Fill Cluster with single GPU Jobs - scheduler is running while submitting jobs": (
        "fill, jobs created with the scheduler on (s)"
    ),
}


@dataclass(frozen=True)
class Fill:
    """One run's fill times, by test name; ``problem`` says why one is missing."""

    profile: str
    run_id: str
    state: str
    seconds: dict[str, float]
    problem: str | None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--node-count", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3, help="runs under each tuning profile")
    parser.add_argument(
        "--read",
        nargs="+",
        metavar="PROFILE=RUN_ID",
        help="finished runs of the deployment to read, each with the tuning profile it ran under",
    )
    options = parser.parse_args()
    environment = LocalEnvironment(Settings.from_environment())
    deployment = AirflowDeployment(environment)
    if options.read:
        with deployment.served_api() as api:
            _report([_fill(api, *_profile_and_run(text)) for text in options.read])
        return
    fills = []
    with environment.s3().scratch_bucket() as bucket:
        for profile in _alternating(options.runs):
            upgraded = deployment.deploy(
                Overrides(
                    env={"KAI_SCALE_RESULTS_BUCKET": bucket, "KAI_SCALE_KAI_TUNING_PROFILE": profile},
                    config={"logging": {"remote_base_log_folder": f"s3://{bucket}/airflow-logs"}},
                )
            )
            # After an upgrade, only the DAG the new release parsed is triggered.
            since = datetime.now(UTC) if upgraded else None
            with deployment.served_api() as api:
                wait_for_dag(api, since=since)
                run_id = trigger(api, {"node_count": options.node_count, "scenarios": [SCENARIO]})
                follow(api, run_id)
                fills.append(_fill(api, profile, run_id))
            print(f"{profile}: {run_id} {fills[-1].seconds or fills[-1].problem}", flush=True)
    _report(fills)


def _alternating(runs: int) -> list[str]:
    """``runs`` of each profile as A B B A A B…: each pair in the other order than the one before."""
    pairs = [(PROFILED, UNPROFILED) if index % 2 == 0 else (UNPROFILED, PROFILED) for index in range(runs)]
    return [profile for pair in pairs for profile in pair]


def _profile_and_run(text: str) -> tuple[str, str]:
    profile, separator, run_id = text.partition("=")
    if not separator or not profile or not run_id:
        raise SystemExit(f"--read takes PROFILE=RUN_ID, got {text!r}")
    return profile, run_id


def _fill(api: AirflowApi, profile: str, run_id: str) -> Fill:
    """The run's fill times from its summary (the runner's outcome, as KAI's suite reported them)."""
    state = str(api.get(run_path(run_id))["state"])
    summary = run_summary(api, run_id)
    entries = [entry for entry in (summary or {}).get("scenarios", []) if entry["scenario"] == SCENARIO]
    outcome = entries[0]["outcome"] if entries else None
    if outcome is None:
        return Fill(profile, run_id, state, {}, f"no outcome of {SCENARIO} in the run's summary")
    seconds, problems = {}, []
    for test in outcome["tests"]:
        name, time = test["test_name"], (test["details"] or {}).get("time")
        if name not in FILL_TESTS or test["status"] != "success" or time is None:
            continue
        try:
            seconds[name] = parse_duration(str(time)).total_seconds()
        except ValueError as error:
            problems.append(f"{name}: time {error}")
    problems += [f"no successful {name!r}" for name in FILL_TESTS if name not in seconds]
    return Fill(profile, run_id, state, seconds, "; ".join(problems) or None)


def _report(fills: Sequence[Fill]) -> None:
    columns = list(FILL_TESTS)
    print("| run | tuning profile | state | " + " | ".join(FILL_TESTS[name] for name in columns) + " |")
    print("|---" * (3 + len(columns)) + "|")
    for fill in fills:
        cells = [f"{fill.seconds[name]:.1f}" if name in fill.seconds else "—" for name in columns]
        note = f" ({fill.problem})" if fill.problem else ""
        print(f"| {fill.run_id}{note} | {fill.profile} | {fill.state} | " + " | ".join(cells) + " |")
    means: dict[str, dict[str, float]] = {}
    for profile in dict.fromkeys(fill.profile for fill in fills):
        cells = []
        for name in columns:
            values = [f.seconds[name] for f in fills if f.profile == profile and name in f.seconds]
            if values:
                means.setdefault(profile, {})[name] = statistics.mean(values)
                spread = statistics.stdev(values) if len(values) > 1 else 0.0
                cells.append(f"{statistics.mean(values):.1f} ± {spread:.1f} (n={len(values)})")
            else:
                cells.append("not measured")
        print(f"| **mean ± sd** | {profile} | | " + " | ".join(cells) + " |")
    costs = [
        f"{means[PROFILED][name] / means[UNPROFILED][name] - 1:+.1%}"
        if name in means.get(PROFILED, {}) and name in means.get(UNPROFILED, {})
        else "not measured: a profile without a fill"
        for name in columns
    ]
    print(f"| **profiling's cost** | {PROFILED} / {UNPROFILED} - 1 | | " + " | ".join(costs) + " |")


if __name__ == "__main__":
    main()
