"""The results bucket for the unit tests that use one, on their S3 endpoint (tests/unit/conftest.py)."""

from __future__ import annotations

import json
import uuid

import pytest

from kai_scale.hooks.results_bucket import ResultsBucketHook

# The Airflow connection the tests' bucket is reached through, as a deployment defines one.
S3_CONN_ID = "kai_scale_unit_s3"


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
