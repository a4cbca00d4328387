"""The pipeline's run id: URL-safe, sorting by time, the same for every retry of one Airflow run. Pure."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

from airflow.sdk.types import DagRunProtocol

RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9._-]+$")


def pipeline_run_id(*, airflow_run_id: str, run_after: datetime) -> str:
    """``<UTC time>-<kind>-<hash of Airflow's run id>``, e.g. ``20261122T020000Z-scheduled-1a2b3c4d``.

    Airflow's run ids hold ``:`` and ``+``; the hash keeps two runs of the same second apart while
    staying stable for one Airflow run, whose ``run_after`` does not change on retries.
    """
    stamp = run_after.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    kind = re.sub(r"[^a-z]", "", airflow_run_id.split("__", 1)[0].lower()) or "run"
    digest = hashlib.sha256(airflow_run_id.encode()).hexdigest()[:8]
    return f"{stamp}-{kind}-{digest}"


def run_id_of(dag_run: DagRunProtocol) -> str:
    """The pipeline run id of an Airflow DAG run (its ``run_id`` and ``run_after``)."""
    return pipeline_run_id(airflow_run_id=dag_run.run_id, run_after=dag_run.run_after)
