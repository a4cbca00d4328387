"""The local S3 endpoint: moto's server with its writes taken one at a time (localenv/s3_server.py)."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.s3.models import S3Backend
from werkzeug.serving import make_server

from localenv.s3_server import RequestHandler, serialized_writes
from tests.waiting import free_ports

WRITERS = 8
ROUNDS = 5
# Between moto's check of a condition and its store: wide enough that racing writers always overlap.
STORE_DELAY_SECONDS = 0.02


class ProbeApp:
    """A WSGI app that holds each request until released and records which requests ran together.

    What is tested is the wrapper's contract (writes never overlap a write, reads are not held, a
    response is drained before the next write), which moto's own race shows too rarely to rely on.
    """

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered: list[str] = []
        self.inside = threading.Semaphore(0)
        self.drained: list[str] = []

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ["PATH_INFO"]
        self.entered.append(path)
        self.inside.release()
        start_response("200 OK", [])

        def body() -> Iterator[bytes]:  # lazy, as a streamed response is
            self.release.wait(timeout=30)
            yield b"done"
            self.drained.append(path)

        return body()


def _request(app: Callable[..., Iterable[bytes]], method: str, path: str) -> bytes:
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "CONTENT_LENGTH": "0", "wsgi.input": None}
    return b"".join(app(environ, lambda *_: None))


def test_a_write_waits_for_the_write_before_it_while_reads_go_on() -> None:
    probe = ProbeApp()
    app = serialized_writes(probe)
    with ThreadPoolExecutor(max_workers=3) as pool:
        try:
            first = pool.submit(_request, app, "PUT", "/bucket/first")
            assert probe.inside.acquire(timeout=10), "the first write entered"
            second = pool.submit(_request, app, "PUT", "/bucket/second")
            read = pool.submit(_request, app, "GET", "/bucket/first")
            assert probe.inside.acquire(timeout=10), "the read entered beside the held write"
            assert not probe.inside.acquire(timeout=1), "the second write entered while the first was held"
            assert probe.entered == ["/bucket/first", "/bucket/first"]
        finally:
            probe.release.set()
        assert [first.result(10), second.result(10), read.result(10)] == [b"done"] * 3
    assert probe.entered[-1] == "/bucket/second"
    first_write_drained = probe.drained.index("/bucket/first")
    assert first_write_drained < probe.drained.index("/bucket/second"), "drained before the next write"


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The wrapped moto app served in this process, its store step slowed by STORE_DELAY_SECONDS.

    The delay is the one thing patched: it makes moto's check-then-store race show every time.
    """
    store = S3Backend.put_object

    def slow_store(self: S3Backend, *args: Any, **kwargs: Any) -> Any:
        time.sleep(STORE_DELAY_SECONDS)
        return store(self, *args, **kwargs)

    monkeypatch.setattr(S3Backend, "put_object", slow_store)
    (port,) = free_ports(1)
    app = serialized_writes(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=RequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)


def _client(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="unit-test-key",
        aws_secret_access_key="unit-test-secret",
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
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
def test_of_writers_racing_with_one_condition_exactly_one_wins(endpoint: str, condition: str) -> None:
    bucket = f"race-{uuid.uuid4().hex[:12]}"
    _client(endpoint).create_bucket(Bucket=bucket)
    clients = [_client(endpoint) for _ in range(WRITERS)]  # built first: building one is slow
    for round_ in range(ROUNDS):
        key = f"manifest-{round_}.json"
        arguments = {"IfNoneMatch": "*"}
        if condition == "IfMatch":
            arguments = {"IfMatch": clients[0].put_object(Bucket=bucket, Key=key, Body=b"before")["ETag"]}
        won = _racing_writes(clients, bucket=bucket, key=key, condition=arguments)
        assert len(won) == 1, f"round {round_}: writers {won} all won with {condition}"
        body = clients[0].get_object(Bucket=bucket, Key=key)["Body"].read()
        assert body == f"writer {won[0]}".encode()


def test_an_upload_that_stalls_holds_up_no_other_write(endpoint: str) -> None:
    bucket = f"stall-{uuid.uuid4().hex[:12]}"
    client = _client(endpoint)
    client.create_bucket(Bucket=bucket)
    host, port = endpoint.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as stalled:
        # Promises 100 bytes, sends 9, then nothing: a writer whose pod died mid-upload.
        stalled.sendall(
            f"PUT /{bucket}/stalled HTTP/1.1\r\nHost: {host}\r\nContent-Length: 100\r\n\r\n".encode()
        )
        stalled.sendall(b"123456789")
        time.sleep(0.5)  # the server has read the headers and waits for the body
        with ThreadPoolExecutor(max_workers=1) as pool:
            other = pool.submit(client.put_object, Bucket=bucket, Key="other", Body=b"written")
            assert other.result(timeout=10)["ResponseMetadata"]["HTTPStatusCode"] == 200
