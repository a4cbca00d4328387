"""An S3 endpoint for the unit tests that read or write the results bucket: a moto server of their own."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kai_scale.hooks.results_bucket import ResultsBucketHook
from tests.waiting import free_ports, wait_for

# The Airflow connection the tests' bucket is reached through, as a deployment defines one.
S3_CONN_ID = "kai_scale_unit_s3"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """``moto_server`` (the local environment's S3 endpoint) on a free loopback port, stopped afterwards."""
    (port,) = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: server.poll() is not None or _answers(url), timeout=30, what=f"moto_server at {url}")
        assert server.poll() is None, f"moto_server on port {port} exited with {server.returncode}"
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def s3_connection_variable(endpoint: str) -> tuple[str, str]:
    """The ``AIRFLOW_CONN_*`` variable (name, value) that defines ``S3_CONN_ID`` to ``endpoint``."""
    connection = {
        "conn_type": "aws",
        "login": "unit-test-key",
        "password": "unit-test-secret",
        "extra": {"endpoint_url": endpoint, "region_name": "us-east-1"},
    }
    return f"AIRFLOW_CONN_{S3_CONN_ID.upper()}", json.dumps(connection)


@pytest.fixture
def s3_connection(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The id of an Airflow AWS connection (an ``AIRFLOW_CONN_*`` variable) to the test endpoint."""
    monkeypatch.setenv(*s3_connection_variable(s3_endpoint))
    return S3_CONN_ID


@pytest.fixture
def results_bucket(s3_connection: str) -> ResultsBucketHook:
    """An empty bucket of the test's own, through that connection."""
    bucket = ResultsBucketHook(aws_conn_id=s3_connection, bucket=f"unit-{uuid.uuid4().hex[:12]}")
    bucket.client.create_bucket(Bucket=bucket.bucket)
    return bucket
