"""The kubelet's log API (``/containerLogs``) for the runner node: ``kubectl logs`` reaches our processes."""

from __future__ import annotations

import contextlib
import datetime as dt
import ssl
import tempfile
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from localenv.runner_kubelet.logs import ContainerLog, LogQuery, parse_timestamp, render

FOLLOW_POLL_SECONDS = 0.2


class LogSource:
    """What the server needs to find a container's log: its file and whether it can still grow."""

    def __init__(self, *, log: ContainerLog, container: str, finished: Callable[[], bool]) -> None:
        self.log = log
        self.container = container
        self.finished = finished


# (namespace, pod name) -> the pod's log, or None when the node runs no such pod.
LogLookup = Callable[[str, str], LogSource | None]


def parse_query(raw_query: str) -> LogQuery:
    """Read PodLogOptions from the query string the API server forwards."""
    params = {key: values[-1] for key, values in parse_qs(raw_query).items()}

    def flag(name: str) -> bool:
        return params.get(name, "false").lower() in ("true", "1")

    since = None
    if "sinceTime" in params:
        since = parse_timestamp(params["sinceTime"])
    elif "sinceSeconds" in params:
        since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=int(params["sinceSeconds"]))
    return LogQuery(
        follow=flag("follow"),
        timestamps=flag("timestamps"),
        tail_lines=int(params["tailLines"]) if "tailLines" in params else None,
        since=since,
        limit_bytes=int(params["limitBytes"]) if "limitBytes" in params else None,
    )


def make_handler(lookup: LogLookup) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to ``lookup``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            """Keep access logs out of the agent's log."""

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            parts = url.path.strip("/").split("/")
            if url.path == "/healthz":
                self._reply(200, b"ok")
                return
            if len(parts) != 4 or parts[0] != "containerLogs":
                self._reply(404, f"the runner node serves only /containerLogs, not {url.path}".encode())
                return
            _, namespace, pod, container = parts
            source = lookup(namespace, pod)
            if source is None or source.container != container:
                self._reply(
                    404, f"container {container!r} of pod {namespace}/{pod} is not on this node".encode()
                )
                return
            try:
                query = parse_query(url.query)
            except ValueError as error:
                self._reply(400, f"bad log options: {error}".encode())
                return
            # The client may stop reading at any time (kubectl logs -f interrupted).
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._stream(source, query)

        def _reply(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _stream(self, source: LogSource, query: LogQuery) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            budget = query.limit_bytes
            lines, offset = source.log.read()
            if query.tail_lines is not None:
                lines = lines[-query.tail_lines :] if query.tail_lines > 0 else []
            while True:
                for rendered in render(lines, query):
                    chunk = rendered if budget is None else rendered[:budget]
                    if budget is not None:
                        budget -= len(chunk)
                    if chunk:
                        self._chunk(chunk)
                    if budget == 0:
                        self._chunk(b"")
                        return
                # Read the rest once more after the process ends: its last lines may land late.
                done = source.finished()
                if not query.follow or (done and not lines):
                    break
                time.sleep(0 if done else FOLLOW_POLL_SECONDS)
                lines, offset = source.log.read(offset=offset)
            self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


def self_signed_context(host: str) -> ssl.SSLContext:
    """A TLS context with a fresh self-signed certificate (the API server does not verify kubelets here)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as scratch:
        cert_path, key_path = Path(scratch) / "tls.crt", Path(scratch) / "tls.key"
        cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        context.load_cert_chain(cert_path, key_path)
    return context


def serve(*, port: int, lookup: LogLookup) -> ThreadingHTTPServer:
    """Start serving on ``127.0.0.1:port`` over TLS; the caller runs ``serve_forever``."""
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(lookup))
    server.daemon_threads = True
    server.socket = self_signed_context("localhost").wrap_socket(server.socket, server_side=True)
    return server
