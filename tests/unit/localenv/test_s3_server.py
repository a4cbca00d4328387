"""The local S3 endpoint: moto's server with its writes taken one at a time (localenv/s3_server.py)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from localenv.s3_server import serialized_writes

WRITERS = 16
ROUNDS = 10


class ProbeApp:
    """A WSGI app that holds each request until released and records which requests ran together.

    It stands for moto's app, whose check-then-store race is too rare to show on demand; what is
    tested is the wrapper's contract: writes never overlap anything that writes, reads are not held.
    """

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered: list[str] = []
        self.inside = threading.Semaphore(0)
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with self._lock:
            self.entered.append(environ["PATH_INFO"])
        self.inside.release()
        self.release.wait(timeout=30)
        start_response("200 OK", [])
        return [b"done"]


def _request(app: Callable[..., Iterable[bytes]], method: str, path: str) -> bytes:
    return b"".join(app({"REQUEST_METHOD": method, "PATH_INFO": path}, lambda *_: None))


def test_a_write_waits_for_the_write_before_it_while_reads_go_on() -> None:
    probe = ProbeApp()
    app = serialized_writes(probe)
    with ThreadPoolExecutor(max_workers=3) as pool:
        first = pool.submit(_request, app, "PUT", "/bucket/first")
        assert probe.inside.acquire(timeout=10), "the first write entered"
        second = pool.submit(_request, app, "PUT", "/bucket/second")
        read = pool.submit(_request, app, "GET", "/bucket/first")
        assert probe.inside.acquire(timeout=10), "the read entered beside the held write"
        assert not probe.inside.acquire(timeout=1), "the second write entered while the first was held"
        assert probe.entered == ["/bucket/first", "/bucket/first"]
        probe.release.set()
        assert [first.result(10), second.result(10), read.result(10)] == [b"done"] * 3
    assert probe.entered[-1] == "/bucket/second"


def _client(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="unit-test-key",
        aws_secret_access_key="unit-test-secret",
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
    )


def _racing_writes(clients: list[Any], *, bucket: str, key: str, condition: dict[str, str]) -> list[int]:
    """The writers whose conditional write of ``key`` succeeded, all starting at once."""
    start = threading.Barrier(len(clients))

    def write(writer: int) -> int:
        start.wait()
        try:
            clients[writer].put_object(Bucket=bucket, Key=key, Body=f"writer {writer}".encode(), **condition)
        except ClientError as error:
            return int(error.response["ResponseMetadata"]["HTTPStatusCode"])
        return 200

    with ThreadPoolExecutor(max_workers=len(clients)) as pool:
        statuses = list(pool.map(write, range(len(clients))))
    assert set(statuses) <= {200, 412}, statuses
    return [writer for writer, status in enumerate(statuses) if status == 200]


@pytest.mark.parametrize("condition", ["IfMatch", "IfNoneMatch"])
def test_of_writers_racing_with_one_condition_exactly_one_wins(s3_endpoint: str, condition: str) -> None:
    bucket = f"race-{uuid.uuid4().hex[:12]}"
    _client(s3_endpoint).create_bucket(Bucket=bucket)
    clients = [_client(s3_endpoint) for _ in range(WRITERS)]  # built first: building one is slow
    for round_ in range(ROUNDS):
        key = f"manifest-{round_}.json"
        arguments = {"IfNoneMatch": "*"}
        if condition == "IfMatch":
            arguments = {"IfMatch": clients[0].put_object(Bucket=bucket, Key=key, Body=b"before")["ETag"]}
        won = _racing_writes(clients, bucket=bucket, key=key, condition=arguments)
        assert len(won) == 1, f"round {round_}: writers {won} all won with {condition}"
        body = clients[0].get_object(Bucket=bucket, Key=key)["Body"].read()
        assert body == f"writer {won[0]}".encode()
