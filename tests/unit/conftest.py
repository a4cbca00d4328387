"""An S3 endpoint for the unit tests: the local environment's (``localenv.s3_server``), run on its own."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.waiting import free_ports, wait_for


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``localenv.s3_server`` on a free loopback port, stopped afterwards."""
    (port,) = free_ports(1)
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("s3-endpoint") / "server.log"
    with log.open("wb") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "localenv.s3_server", "--host", "127.0.0.1", "--port", str(port)],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(
            lambda: server.poll() is not None or _answers(url), timeout=30, what=f"the S3 endpoint at {url}"
        )
        said = log.read_text(errors="replace")[-2000:]
        assert server.poll() is None, (
            f"the S3 endpoint on port {port} exited with {server.returncode}: {said}"
        )
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
