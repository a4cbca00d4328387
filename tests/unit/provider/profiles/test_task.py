"""collect_metrics' profiles step: when it waits for Pyroscope, and what it writes, on a real S3 endpoint.

Pyroscope itself runs in the local environment's nights (tests/integration/airflow_deployment); here
its connection is undefined, or points at a closed loopback port.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.metrics.collection import Window
from kai_scale.object_keys import run_profiles_key
from kai_scale.profiles.collection import QUERYABLE_AFTER, RunProfiles
from kai_scale.profiles.task import collect_profiles
from tests.unit.provider.conftest import S3_CONN_ID, s3_connection_variable
from tests.waiting import free_ports

NOW = datetime(2026, 11, 22, 2, 10, tzinfo=UTC)
# The last scenario ended 5 s ago.
WINDOWS = {
    "fill": Window(start=NOW - timedelta(minutes=8), end=NOW - timedelta(minutes=4), source="runner"),
    "reclaim": Window(start=NOW - timedelta(minutes=3), end=NOW - timedelta(seconds=5), source="runner"),
    "skipped": None,
}


@pytest.fixture
def bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> ResultsBucketHook:
    monkeypatch.setenv(*s3_connection_variable(s3_endpoint))
    bucket = ResultsBucketHook(aws_conn_id=S3_CONN_ID, bucket=f"unit-profiles-{uuid.uuid4().hex[:12]}")
    bucket.client.create_bucket(Bucket=bucket.bucket)
    return bucket


def _collect(bucket: ResultsBucketHook, conn_id: str) -> tuple[RunProfiles, list[float]]:
    slept: list[float] = []
    document = collect_profiles(
        pyroscope_conn_id=conn_id,
        bucket=bucket,
        run_id="r1",
        windows=WINDOWS,
        now=lambda: NOW,
        sleep=slept.append,
    )
    return document, slept


def test_without_a_pyroscope_connection_nothing_waits_and_each_profile_says_why(
    bucket: ResultsBucketHook,
) -> None:
    document, slept = _collect(bucket, "no_pyroscope_here")
    assert slept == []
    reasons = {
        p.reason for s in document.scenarios.values() for p in s.profiles.values() if p.status == "missing"
    }
    assert len(reasons) == 2, reasons  # the connection's, and the skipped scenario's window
    assert any("Airflow connection 'no_pyroscope_here' (Pyroscope) is not defined" in r for r in reasons)
    written = bucket.read_bytes(run_profiles_key("r1"))
    assert written is not None
    assert RunProfiles.model_validate(json.loads(written)) == document


def test_with_a_connection_the_last_window_is_waited_for_then_an_unreachable_pyroscope_is_said(
    bucket: ResultsBucketHook, monkeypatch: pytest.MonkeyPatch
) -> None:
    (port,) = free_ports(1)  # nothing listens there
    monkeypatch.setenv(
        "AIRFLOW_CONN_PYRO_CLOSED", json.dumps({"conn_type": "pyroscope", "host": f"http://127.0.0.1:{port}"})
    )
    document, slept = _collect(bucket, "pyro_closed")
    assert slept == [(QUERYABLE_AFTER - timedelta(seconds=5)).total_seconds()]
    reasons = {
        profile.reason
        for name in ("fill", "reclaim")
        for profile in document.scenarios[name].profiles.values()
        if profile.status == "missing"
    }
    # Every profile says so, the first one's error reused: none waits out a second connection attempt.
    (reason,) = reasons
    assert reason.startswith(f"Pyroscope at http://127.0.0.1:{port} is unreachable: "), reason
