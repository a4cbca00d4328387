#!/usr/bin/env python3
"""A STAND-IN for KAI's compiled scale suite (``go test -c ./test/e2e/scale``), for tests only.

KAI cannot be built or run here, so this script plays the suite's part in the runner's ``ginkgo``
path: it takes the suite's flags, writes ``kwok_scale_test.json`` in its working directory in the
suite's format and a Ginkgo JSON report where ``--ginkgo.json-report`` says, and exits like the suite.
It measures nothing. ``STANDIN_MODE`` picks the behaviour:

- ``pass``: one passing spec that writes a result entry, exit 0;
- ``fail``: one failing spec that writes no entry (as the real suite's failures do), exit 1;
- ``truncate``: a passing run whose report is cut off mid-way, exit 0;
- ``hang``: never ends (to be stopped by the pod's deadline);
- ``slow``: ``pass`` after sleeping ``STANDIN_SECONDS``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

FILL_TEST = "Fill Cluster with single GPU Jobs"


def spec(state: str, message: str = "") -> dict[str, object]:
    return {
        "ContainerHierarchyTexts": ["Kwok scale test", "Big cluster", "Sanity Fill Cluster"],
        "LeafNodeText": "fill cluster with single GPU Jobs",
        "LeafNodeType": "It",
        "State": state,
        "Failure": {"Message": message} if message else None,
        "RunTime": 396737854402,
    }


def main() -> int:
    flags = dict(arg.split("=", 1) for arg in sys.argv[1:] if arg.startswith("--") and "=" in arg)
    report_path = Path(flags["--ginkgo.json-report"])
    nodes = int(os.environ.get("NODE_COUNT", "500"))
    mode = os.environ.get("STANDIN_MODE", "pass")
    print(f"stand-in suite: focus={flags.get('--ginkgo.focus')!r} nodes={nodes} mode={mode}", flush=True)
    # What a test checks: the runner keeps its signed upload URLs from the suite's environment.
    leaked = any("X-Amz-Signature" in value for value in os.environ.values())
    print(f"stand-in suite: upload URLs in my environment: {leaked}", flush=True)
    if mode == "hang":
        time.sleep(3600)
    if mode == "slow":  # passes after STANDIN_SECONDS
        time.sleep(float(os.environ["STANDIN_SECONDS"]))
        mode = "pass"
    if mode == "fail":
        failure = "Timed out after 900.000s. expected all 4000 pods to be scheduled"
        report = [
            {
                "SuiteDescription": "Scale Suite",
                "SuiteSucceeded": False,
                "SpecReports": [spec("failed", failure)],
            }
        ]
        report_path.write_text(json.dumps(report))
        print(f"[FAILED] {failure}", flush=True)
        return 1
    details = {"nodes": nodes, "jobs": nodes * 8, "time": "6m36.737854402s"}
    Path("kwok_scale_test.json").write_text(
        json.dumps(
            {
                "status": "success",
                "tests": [{"test_name": FILL_TEST, "status": "success", "details": details}],
            }
        )
    )
    passed = json.dumps(
        [{"SuiteDescription": "Scale Suite", "SuiteSucceeded": True, "SpecReports": [spec("passed")]}]
    )
    report_path.write_text(passed[: len(passed) // 2] if mode == "truncate" else passed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
