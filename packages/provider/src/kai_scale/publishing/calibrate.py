"""``make calibrate``: thresholds proposed from the history published in the results bucket.

Reads the manifest and the ``results.json`` of the last successful runs at a node count through the
pipeline's AWS connection, with the DAG's settings (``KAI_SCALE_AWS_CONN_ID``,
``KAI_SCALE_RESULTS_BUCKET``, ``KAI_SCALE_RESULTS_PREFIX``; the scenarios' ``detail_rules`` from
``KAI_SCALE_INCLUDE_DIR``), and prints scenario-file YAML for a person to review and commit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from airflow.sdk.log import configure_logging
from botocore.exceptions import BotoCoreError, ClientError

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.object_keys import manifest_key
from kai_scale.publishing.manifest import ManifestError
from kai_scale.publishing.published_history import read_manifest, read_run
from kai_scale.publishing.verdicts_step import detail_rules
from kai_scale.scenario_files import ScenarioFileError, load_scenarios
from kai_scale.settings import PipelineSettings, SettingsError
from kai_scale.verdicts.calibration import propose_thresholds, thresholds_yaml
from kai_scale.verdicts.history import HistoricRun, comparable_entries

# A person waits at the terminal: an unreachable bucket is reported in seconds, not after 8 tries.
MAX_ATTEMPTS = 2


class CalibrationError(RuntimeError):
    """The published history could not be read; the message says where and what to check."""


def published_runs(settings: PipelineSettings, *, node_count: int, last: int) -> list[HistoricRun]:
    """The last ``last`` successful runs at ``node_count`` in the bucket, oldest first."""
    bucket = ResultsBucketHook(
        aws_conn_id=settings.aws_conn_id, bucket=settings.results_bucket, max_attempts=MAX_ATTEMPTS
    )
    manifest_url = f"s3://{settings.results_bucket}/{manifest_key(settings.results_prefix)}"
    try:
        manifest = read_manifest(bucket, prefix=settings.results_prefix)
        if manifest is None:
            raise CalibrationError(
                f"{manifest_url} does not exist: nothing is published there "
                "(check KAI_SCALE_RESULTS_BUCKET and KAI_SCALE_RESULTS_PREFIX)"
            )
        entries = comparable_entries(manifest, node_count=node_count, last=last)
        if not entries:
            counts = sorted({str(run.get("node_count")) for run in manifest["runs"]})
            raise CalibrationError(
                f"{manifest_url} lists no successful run at {node_count} nodes "
                f"(node counts published: {', '.join(counts) or 'none'})"
            )
        runs = [run for entry in entries if (run := read_run(bucket, entry)) is not None]
    except ManifestError as error:
        raise CalibrationError(f"cannot read the published history: {error}") from error
    except (BotoCoreError, ClientError) as error:
        raise CalibrationError(
            f"cannot read {manifest_url} and its runs: {error}. Check KAI_SCALE_RESULTS_BUCKET, and the "
            f"endpoint and credentials of the Airflow connection '{settings.aws_conn_id}' "
            "(KAI_SCALE_AWS_CONN_ID)"
        ) from error
    if not runs:
        raise CalibrationError(
            f"none of the {len(entries)} runs at {node_count} nodes has a readable results.json"
        )
    return runs


def main(argv: list[str] | None = None) -> int:
    """Print the proposed ``thresholds:``; exit 2 saying what could not be read."""
    parser = argparse.ArgumentParser(prog="python -m kai_scale.publishing.calibrate", description=__doc__)
    parser.add_argument("--node-count", type=int, required=True)
    parser.add_argument("--last", type=int, default=5, help="comparable runs to use (5)")
    parser.add_argument("--margin", type=float, default=0.2, help="relative margin (0.2 = 20 %%)")
    args = parser.parse_args(argv)
    # Checked before anything is read (propose_thresholds checks them too, after).
    if args.last < 1 or not 0 <= args.margin < 1:
        parser.error(f"--last must be at least 1 and --margin in [0, 1), got {args.last} and {args.margin}")
    try:
        settings = PipelineSettings.from_environment(default_include_dir=Path("include"))
        # The scenarios' detail_rules say which side of a detail is bad, as they do for the verdicts.
        rules = detail_rules(load_scenarios(settings.scenarios_dir))
        runs = published_runs(settings, node_count=args.node_count, last=args.last)
        proposals = propose_thresholds(
            [run.tests for run in runs], last=args.last, margin=args.margin, rules=rules
        )
    except (SettingsError, ScenarioFileError, CalibrationError) as error:
        print(f"calibrate: {error}", file=sys.stderr)
        return 2
    print(
        f"calibrate: {len(runs)} runs at {args.node_count} nodes from s3://{settings.results_bucket}/"
        f"{settings.results_prefix} ({runs[0].run_id} .. {runs[-1].run_id})",
        file=sys.stderr,
    )
    sys.stdout.write(thresholds_yaml(proposals, margin=args.margin))
    return 0


if __name__ == "__main__":
    # Airflow logs to stdout, where the proposal goes: a person redirects it to a file.
    configure_logging(output=sys.stderr)
    raise SystemExit(main())
