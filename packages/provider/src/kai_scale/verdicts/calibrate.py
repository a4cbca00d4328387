"""``python -m kai_scale.verdicts.calibrate DIR``: propose thresholds from a local copy of the bucket.

DIR holds ``manifest.json`` and ``<run-id>/results.json`` (as under ``Public/``); runs of the given
node count are read in manifest order. Prints scenario-file YAML for a person to review and commit.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kai_scale.verdicts.calibration import propose_thresholds, thresholds_yaml


def main(argv: list[str] | None = None) -> int:
    """Print the proposed ``thresholds:``; exit 2 naming the file that cannot be read."""
    parser = argparse.ArgumentParser(prog="python -m kai_scale.verdicts.calibrate", description=__doc__)
    parser.add_argument("directory", type=Path, help="local copy of the Public/ prefix")
    parser.add_argument("--node-count", type=int, required=True)
    parser.add_argument("--last", type=int, default=5, help="comparable runs to use (5)")
    parser.add_argument("--margin", type=float, default=0.2, help="relative margin (0.2 = 20 %%)")
    args = parser.parse_args(argv)
    manifest_path = args.directory / "manifest.json"
    try:
        entries = json.loads(manifest_path.read_text())["runs"]
        runs = [
            json.loads((args.directory / entry["run_id"] / "results.json").read_text())["results"]["tests"]
            for entry in entries
            if entry.get("node_count") == args.node_count and entry.get("status") == "success"
        ]
        proposals = propose_thresholds(runs, last=args.last, margin=args.margin)
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"calibrate: cannot read the history under {args.directory}: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(thresholds_yaml(proposals, margin=args.margin))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
