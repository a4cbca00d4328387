"""The local S3 endpoint as a component: its server (``localenv.s3_server``) started and stopped, a client.

The pipeline's bucket (``settings.DEFAULT_BUCKET``) is made when the environment starts; a benchmark
takes a bucket of its own (``scratch_bucket``), removed after.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localenv import processes, settings

NAME = "s3"


@dataclass(frozen=True, kw_only=True)
class S3Endpoint:
    """moto's server on every address (the guard lets only loopback and the pod bridge in)."""

    port: int
    endpoint_url: str
    """Where this machine reaches it."""
    logs_dir: Path
    run_dir: Path

    def start(self) -> None:
        """Start the server in the background (``wait_until_listening`` after)."""
        # Every address, for the runner pods on the bridge.
        argv = [sys.executable, "-m", "localenv.s3_server", "--host", "0.0.0.0", "--port", str(self.port)]
        processes.start(name=NAME, argv=argv, log_dir=self.logs_dir, run_dir=self.run_dir)

    def wait_until_listening(self) -> None:
        """Until it listens; a ComponentError naming its log if it exits first."""
        processes.wait_until_listening(
            name=NAME, port=self.port, timeout=60, log_dir=self.logs_dir, run_dir=self.run_dir
        )

    def running(self) -> bool:
        """Whether its server runs."""
        return processes.running_pid(name=NAME, run_dir=self.run_dir) is not None

    def stop(self) -> None:
        """Stop its server (its objects live in its memory: gone with it)."""
        processes.stop(name=NAME, run_dir=self.run_dir)

    def client(self) -> Any:
        """A boto3 client of the endpoint, with its credentials."""
        import boto3  # noqa: PLC0415 - only some commands need it; keeps `env` and `status` light

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=settings.S3_ACCESS_KEY,
            aws_secret_access_key=settings.S3_SECRET_KEY,
            region_name=settings.S3_REGION,
        )

    def scratch_bucket(self) -> AbstractContextManager[str]:
        """A bucket of its own for a benchmark (``scratch_bucket``); deleted with its objects."""
        return scratch_bucket(self.client())

    def create_pipeline_bucket(self) -> None:
        """The bucket the pipeline publishes to (``KAI_SCALE_RESULTS_BUCKET`` of ``localenv env``)."""
        self.client().create_bucket(Bucket=settings.DEFAULT_BUCKET)


@contextmanager
def scratch_bucket(s3: Any) -> Iterator[str]:
    """A bucket of its own (``kai-scale-bench-<random>``) on the S3 client's endpoint; deleted after."""
    bucket = f"kai-scale-bench-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    try:
        yield bucket
    finally:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                s3.delete_object(Bucket=bucket, Key=item["Key"])
        s3.delete_bucket(Bucket=bucket)
