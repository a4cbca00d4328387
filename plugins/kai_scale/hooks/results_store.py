"""The results bucket: presigned uploads for runner pods, reading and writing JSON objects."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError

JSON_CONTENT_TYPE = "application/json"
# SigV4 presigned URLs are valid for at most 7 days.
MAX_PRESIGN_SECONDS = 7 * 24 * 3600


class ResultsStore:
    """Objects of the results bucket, through the Airflow AWS connection. The client is built on first use.

    :param aws_conn_id: Airflow connection (its extra may set ``endpoint_url``).
    :param bucket: the results bucket.
    """

    def __init__(self, *, aws_conn_id: str, bucket: str) -> None:
        self.aws_conn_id = aws_conn_id
        self.bucket = bucket

    @cached_property
    def client(self) -> Any:
        """The boto3 S3 client of the connection (SigV4, retrying transient errors)."""
        # Imported here: boto3 is slow to import and DAG parsing never needs it.
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook  # noqa: PLC0415

        config = Config(signature_version="s3v4", retries={"max_attempts": 8, "mode": "standard"})
        return S3Hook(aws_conn_id=self.aws_conn_id, config=config).get_conn()

    def presign_put(self, *, key: str, expires_seconds: int) -> str:
        """A URL that lets its holder PUT one JSON object at ``key``, and nothing else."""
        return str(
            self.client.generate_presigned_url(
                "put_object",
                Params={"Bucket": self.bucket, "Key": key, "ContentType": JSON_CONTENT_TYPE},
                ExpiresIn=min(expires_seconds, MAX_PRESIGN_SECONDS),
            )
        )

    def read_text(self, key: str) -> str | None:
        """The object's text, or None when it does not exist."""
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        return str(response["Body"].read().decode("utf-8", errors="replace"))

    def exists(self, key: str) -> bool:
        """Whether the object exists."""
        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return False
            raise
        return True

    def write_text(self, *, key: str, text: str) -> None:
        """Write (or overwrite) a JSON object."""
        self.client.put_object(Bucket=self.bucket, Key=key, Body=text.encode(), ContentType=JSON_CONTENT_TYPE)
