"""The results bucket: presigned uploads for runner pods, reading and writing JSON objects."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import IO, TYPE_CHECKING, Any, Literal

from airflow.sdk import BaseHook
from botocore.exceptions import BotoCoreError, ClientError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import GetObjectOutputTypeDef, PutObjectRequestTypeDef

JSON_CONTENT_TYPE = "application/json"
# Any object that is not JSON, such as a gzipped pprof profile.
BINARY_CONTENT_TYPE = "application/octet-stream"
# SigV4 presigned URLs are valid for at most 7 days.
MAX_PRESIGN_SECONDS = 7 * 24 * 3600
# S3 answers a lost conditional write with 412, or 409 when two conditional writes overlap.
CONDITION_FAILED_CODES = ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")
NOT_FOUND_CODES = ("NoSuchKey", "404", "NotFound")
# Per attempt; the standard retry mode then backs off and tries again.
CONNECT_TIMEOUT_SECONDS = 10
READ_TIMEOUT_SECONDS = 20
# What S3 answers a GET with If-None-Match when the object still has that ETag.
NOT_MODIFIED_CODES = ("304", "NotModified")


class BucketError(RuntimeError):
    """The results bucket could not be read or written; the message says what was being done."""


class ObjectChanged(RuntimeError):
    """A conditional write lost: the object changed (or appeared) since it was read."""


@dataclass(frozen=True, kw_only=True)
class Versioned:
    """An object's bytes and the ETag it had when read."""

    body: bytes
    etag: str


class Unchanged(Enum):
    """The answer of ``read_if_changed`` when the object still has the ETag the caller holds."""

    UNCHANGED = "unchanged"


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


class ResultsBucketHook(BaseHook):
    """Objects of the results bucket, through the Airflow AWS connection. The client is built on first use.

    :param aws_conn_id: Airflow connection (its extra may set ``endpoint_url``).
    :param bucket: the results bucket.
    :param max_attempts: tries of each request; transient errors (5xx, throttling, connection errors)
        are retried with exponential backoff and jitter (botocore's standard retry mode).
    """

    conn_name_attr = "aws_conn_id"
    default_conn_name = "aws_default"
    # The amazon provider's connection type: this hook reads the same connections as S3Hook.
    conn_type = "aws"
    hook_name = "KAI scale results bucket"

    def __init__(self, *, aws_conn_id: str, bucket: str, max_attempts: int = 8) -> None:
        super().__init__()
        self.aws_conn_id = aws_conn_id
        self.bucket = bucket
        self.max_attempts = max_attempts

    @cached_property
    def client(self) -> S3Client:
        """The boto3 S3 client of the connection (SigV4, retrying transient errors)."""
        # Imported here: boto3 and botocore are slow to import and DAG parsing never needs them.
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook  # noqa: PLC0415
        from botocore.config import Config  # noqa: PLC0415

        config = Config(
            signature_version="s3v4",
            retries={"total_max_attempts": self.max_attempts, "mode": "standard"},
            # botocore waits 60 s for a silent endpoint: a hang as long is then waited out in one
            # attempt, unseen. The objects are small, so a request that hears nothing for
            # READ_TIMEOUT_SECONDS is given up and retried (and logged).
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            read_timeout=READ_TIMEOUT_SECONDS,
        )
        client: S3Client = S3Hook(aws_conn_id=self.aws_conn_id, config=config).get_conn()
        client.meta.events.register("needs-retry.s3", self._log_failed_attempt)
        return client

    def _log_failed_attempt(
        self, *, attempts: int, operation: Any, response: Any, caught_exception: Exception | None, **_: Any
    ) -> None:
        """Say in the task's log that a request failed, which botocore's retries tell at debug level only.

        Called by botocore after every attempt; ``response`` is (HTTP response, parsed body) or None.
        """
        if caught_exception is not None:
            cause = f"{type(caught_exception).__name__}: {caught_exception}"
        elif response is not None and (response[0].status_code >= 500 or response[0].status_code == 429):
            cause = f"HTTP {response[0].status_code}"
        else:
            return
        self.log.warning(
            "S3 %s in s3://%s failed on attempt %d of at most %d (%s)",
            operation.name,
            self.bucket,
            attempts,
            self.max_attempts,
            cause,
        )

    @contextmanager
    def errors_named(self, doing: str) -> Iterator[None]:
        """Turn the S3 client's errors inside the block into one BucketError saying what failed."""
        try:
            yield
        except (BotoCoreError, ClientError) as error:
            raise BucketError(
                f"could not {doing} in s3://{self.bucket}: {error}. Check the bucket, its endpoint and "
                f"the credentials of connection '{self.aws_conn_id}', then clear this task"
            ) from error

    def presign_put(self, *, key: str, expires_seconds: int) -> str:
        """A URL that lets its holder PUT one JSON object at ``key``, and nothing else."""
        return str(
            self.client.generate_presigned_url(
                "put_object",
                Params={"Bucket": self.bucket, "Key": key, "ContentType": JSON_CONTENT_TYPE},
                ExpiresIn=min(expires_seconds, MAX_PRESIGN_SECONDS),
            )
        )

    def _get(self, key: str) -> GetObjectOutputTypeDef | None:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as error:
            if _code(error) in NOT_FOUND_CODES:
                return None
            raise

    def read_bytes(self, key: str) -> bytes | None:
        """The object's bytes, or None when it does not exist."""
        response = self._get(key)
        return None if response is None else bytes(response["Body"].read())

    def read_text(self, key: str) -> str | None:
        """The object's text, or None when it does not exist."""
        raw = self.read_bytes(key)
        return None if raw is None else raw.decode("utf-8", errors="replace")

    def read_versioned(self, key: str) -> Versioned | None:
        """The object's bytes with its ETag (for a conditional write back), or None when it does not exist."""
        response = self._get(key)
        if response is None:
            return None
        return Versioned(body=bytes(response["Body"].read()), etag=str(response["ETag"]))

    def read_if_changed(
        self, key: str, *, etag: str | None
    ) -> Versioned | Literal[Unchanged.UNCHANGED] | None:
        """The object with its ETag; ``UNCHANGED`` if it still has ``etag``; None when it does not exist.

        An unchanged object's body is not sent (S3's ``If-None-Match``), so re-checking costs one request.
        """
        if etag is None:
            return self.read_versioned(key)
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=key, IfNoneMatch=etag)
        except ClientError as error:
            if _code(error) in NOT_MODIFIED_CODES:
                return Unchanged.UNCHANGED
            if _code(error) in NOT_FOUND_CODES:
                return None
            raise
        return Versioned(body=bytes(response["Body"].read()), etag=str(response["ETag"]))

    def write_conditionally(self, *, key: str, text: str, etag: str | None) -> None:
        """Write only if the object still has ``etag`` (None: only if it does not exist yet).

        Raises ObjectChanged when another writer got there first.
        """
        request: PutObjectRequestTypeDef = {
            "Bucket": self.bucket,
            "Key": key,
            "Body": text.encode(),
            "ContentType": JSON_CONTENT_TYPE,
        }
        if etag:
            request["IfMatch"] = etag
        else:
            request["IfNoneMatch"] = "*"
        try:
            self.client.put_object(**request)
        except ClientError as error:
            if _code(error) in CONDITION_FAILED_CODES:
                raise ObjectChanged(f"{key} changed while it was being updated") from error
            raise

    def upload(self, *, key: str, fileobj: IO[bytes]) -> None:
        """Upload a JSON file object of any size (multipart when large)."""
        self.client.upload_fileobj(fileobj, self.bucket, key, ExtraArgs={"ContentType": JSON_CONTENT_TYPE})

    def exists(self, key: str) -> bool:
        """Whether the object exists."""
        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as error:
            if _code(error) in NOT_FOUND_CODES:
                return False
            raise
        return True

    def delete(self, key: str) -> None:
        """Remove the object; nothing happens when it does not exist."""
        self.client.delete_object(Bucket=self.bucket, Key=key)

    def copy(self, *, source: str, key: str, content_type: str) -> bool:
        """Copy the object at ``source`` to ``key`` in the bucket, server-side; False when ``source`` is gone.

        S3's CopyObject, one request whatever the size up to 5 GB (a run's files are far smaller).
        """
        try:
            self.client.copy_object(
                Bucket=self.bucket,
                Key=key,
                CopySource={"Bucket": self.bucket, "Key": source},
                MetadataDirective="REPLACE",
                ContentType=content_type,
            )
        except ClientError as error:
            if _code(error) in NOT_FOUND_CODES:
                return False
            raise
        return True

    def write_bytes(self, *, key: str, data: bytes, content_type: str) -> None:
        """Write (or overwrite) an object that is not JSON, e.g. a gzipped pprof profile."""
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)

    def write_text(self, *, key: str, text: str) -> None:
        """Write (or overwrite) a JSON object."""
        self.client.put_object(Bucket=self.bucket, Key=key, Body=text.encode(), ContentType=JSON_CONTENT_TYPE)
