"""Merging the scenarios' Ginkgo JSON reports into the run's ginkgo-report.json.

Pure: streams to a file object.

A Ginkgo JSON report is a JSON array of suite reports; the merge is one array of all of them, written
one suite report at a time so only one scenario's report is in memory at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import IO


def merge_reports(
    scenarios: Iterable[str], read_report: Callable[[str], bytes | None], out: IO[bytes]
) -> list[str]:
    """Write the merged report of ``scenarios`` to ``out``; return a problem per report left out.

    ``read_report`` gives a scenario's report bytes, or None when it has none (a workload scenario,
    or a runner that stopped before writing one): such scenarios are simply not in the merge.
    """
    problems: list[str] = []
    out.write(b"[")
    first = True
    for scenario in scenarios:
        raw = read_report(scenario)
        if raw is None:
            continue
        try:
            suites = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            problems.append(f"{scenario}: its Ginkgo report is not valid JSON (truncated?): {error}")
            continue
        if not isinstance(suites, list):
            problems.append(f"{scenario}: its Ginkgo report is not a JSON array of suite reports")
            continue
        for suite in suites:
            out.write(b"" if first else b",")
            out.write(json.dumps(suite).encode())
            first = False
        del suites
    out.write(b"]")
    return problems
