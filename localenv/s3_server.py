"""The local S3 endpoint: moto's server, with its conditional writes made atomic as AWS S3's are.

moto checks a conditional write's precondition (``If-Match`` / ``If-None-Match``) and then stores the
object in separate steps without a lock, so on a loaded host two writers holding the same ETag can
both win: a lost update of ``manifest.json`` that AWS S3 never allows (seen: 2 winners in 1 of 80
rounds of 20 racing writers, and one lost entry in a full ``make test``). Here writes run one at a
time, each request's body read before it waits its turn; reads stay concurrent.

    python -m localenv.s3_server --host 127.0.0.1 --port 29000
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple
from werkzeug.wsgi import get_input_stream

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# A client that stops sending mid-request (a killed pod) is dropped after this long, as S3 drops it.
CLIENT_TIMEOUT_SECONDS = 60


def serialized_writes(app: WsgiApp) -> WsgiApp:
    """``app`` with its writing requests (any method but GET, HEAD, OPTIONS) run one at a time."""
    lock = threading.Lock()

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD", "GET") in READ_METHODS:
            return app(environ, start_response)
        # Read outside the lock: an upload that stalls must not hold up every other write.
        body = get_input_stream(environ).read()
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ["wsgi.input_terminated"] = False
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        with lock:
            response = app(environ, start_response)
            try:
                # Drained inside the lock: a lazily built response would otherwise write after it is released.
                return list(response)
            finally:
                close = getattr(response, "close", None)
                if close is not None:
                    close()

    return application


class RequestHandler(MotoRequestHandler):
    """moto's request handler, with a read timeout (werkzeug's has none)."""

    timeout = CLIENT_TIMEOUT_SECONDS


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, required=True, help="port to listen on")
    args = parser.parse_args(argv)

    def stop(_signum: int, _frame: FrameType | None) -> None:
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    os.environ.setdefault("MOTO_PORT", str(args.port))  # as moto_server does: moto builds some URLs from it
    app = serialized_writes(DomainDispatcherApplication(create_backend_app))
    run_simple(args.host, args.port, app, threaded=True, request_handler=RequestHandler)


if __name__ == "__main__":
    main()
