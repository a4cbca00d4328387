"""DAG parse cost: the nightly DAG file against a bare ``airflow.sdk`` DAG, as scenarios grow.

Usage: ``.venv/bin/python benchmarks/dag_parse.py [--repeat 7] [--scenario-counts 6 30 100]``.
Each measurement is a fresh Python process that imports ``airflow.sdk`` first (both files need it) and
the ``airflow`` modules the DAG file names (the dag-processor does that once, before it forks a parser
per file), then times executing the DAG file, which is what the dag-processor pays per parse. Modules
load from bytecode, as in a deployed image (``PYTHONDONTWRITEBYTECODE`` is dropped and one unmeasured
parse writes the caches). A last row shows the cost without that pre-import (``parsing_pre_import_modules
= False``). Prints a Markdown table (medians).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BARE_DAG = """
from datetime import datetime
from airflow.sdk import DAG, task

with DAG(dag_id="bare", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False) as dag:
    @task
    def hello() -> None:
        print("hello")
    hello()
"""
TIMER = """
import runpy, sys, time
import importlib
import airflow.sdk  # paid by any DAG file
from airflow.utils.file import iter_airflow_imports
if {pre_import!r}:
    # The dag-processor does this once, before forking a parser ([dag_processor] parsing_pre_import_modules).
    for module in iter_airflow_imports({path!r}):
        importlib.import_module(module)
started = time.perf_counter()
runpy.run_path({path!r})
print(time.perf_counter() - started)
"""


def median_parse_seconds(path: Path, *, env: dict[str, str], repeat: int, pre_import: bool = True) -> float:
    """Median over ``repeat`` parses, after one unmeasured parse that writes the bytecode caches."""
    parse_seconds(path, env=env, pre_import=pre_import)
    return statistics.median(parse_seconds(path, env=env, pre_import=pre_import) for _ in range(repeat))


def parse_seconds(path: Path, *, env: dict[str, str], pre_import: bool = True) -> float:
    code = TIMER.format(path=str(path), pre_import=pre_import)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(result.stdout.strip().splitlines()[-1])


def include_with(count: int, root: Path) -> Path:
    """The shipped include/ with ``count`` scenarios (copies of the shipped ones, renamed)."""
    include = root / f"include-{count}"
    shutil.copytree(REPO / "include", include, ignore=shutil.ignore_patterns("scenarios"))
    (include / "scenarios").mkdir()
    shipped = sorted((REPO / "include" / "scenarios").glob("*.yaml"))
    for index in range(count):
        document = yaml.safe_load(shipped[index % len(shipped)].read_text())
        document["name"] = f"{document['name'][:30]}-{index}"
        (include / "scenarios" / f"{document['name']}.yaml").write_text(yaml.safe_dump(document))
    return include


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--scenario-counts", type=int, nargs="+", default=[6, 30, 100])
    options = parser.parse_args()
    base_env = {**os.environ, "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    # As in a deployed image, modules load from bytecode: without it every parse recompiles them all.
    base_env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        bare = root / "bare_dag.py"
        bare.write_text(BARE_DAG)
        base_env["AIRFLOW_HOME"] = str(root / "airflow")
        bare_time = median_parse_seconds(bare, env=base_env, repeat=options.repeat)
        print(f"| DAG file (median of {options.repeat} fresh processes) | parse | over the bare DAG |")
        print("|---|---|---|")
        print(f"| bare airflow.sdk DAG, 1 task | {bare_time:.3f} s | - |")
        for count in options.scenario_counts:
            env = {**base_env, "KAI_SCALE_INCLUDE_DIR": str(include_with(count, root))}
            seconds = median_parse_seconds(
                REPO / "dags" / "kai_scale_nightly.py", env=env, repeat=options.repeat
            )
            print(
                f"| kai_scale_nightly, {count} scenarios | {seconds:.3f} s | +{seconds - bare_time:.3f} s |"
            )
        env = {**base_env, "KAI_SCALE_INCLUDE_DIR": str(REPO / "include")}
        seconds = median_parse_seconds(
            REPO / "dags" / "kai_scale_nightly.py", env=env, repeat=options.repeat, pre_import=False
        )
        row = "kai_scale_nightly, shipped scenarios, no pre-import"
        print(f"| {row} | {seconds:.3f} s | +{seconds - bare_time:.3f} s |")


if __name__ == "__main__":
    main()
