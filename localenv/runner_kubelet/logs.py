"""Container logs in the CRI format the kubelet writes, and the reads the kubelet log API serves from them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

# What the kubelet keeps as a failed container's message under FallbackToLogsOnError.
FALLBACK_MESSAGE_LINES = 80
FALLBACK_MESSAGE_BYTES = 2048


def rfc3339_nano(moment: datetime) -> str:
    """A UTC timestamp with nanosecond digits, as CRI log lines carry."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


def parse_timestamp(text: str) -> datetime:
    """Parse an RFC 3339 timestamp with up to nanosecond precision."""
    text = text.replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:
        # datetime keeps microseconds: cut the fraction to six digits, keep the offset after it.
        fraction_end = len(rest) - len(rest.lstrip("0123456789"))
        text = f"{head}.{rest[:fraction_end][:6].ljust(6, '0')}{rest[fraction_end:]}"
    return datetime.fromisoformat(text)


@dataclass(frozen=True, kw_only=True)
class LogLine:
    """One line of a container's output."""

    time: datetime
    """When the line was read from the container."""
    stream: str
    """``stdout`` or ``stderr``."""
    text: str
    """The line without its newline."""


class ContainerLog:
    """Appends a container's lines to a CRI-format file and reads them back (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def pump(self, source: IO[bytes], stream: str) -> None:
        """Copy ``source`` line by line into the log until it closes."""
        for raw in iter(source.readline, b""):
            self.append(LogLine(time=datetime.now(UTC), stream=stream, text=raw.decode(errors="replace")))

    def append(self, line: LogLine) -> None:
        """Write one line; a partial last line (no newline) is still one full CRI entry."""
        text = line.text.rstrip("\n")
        with self._lock, self.path.open("a", encoding="utf-8") as log:
            log.write(f"{rfc3339_nano(line.time)} {line.stream} F {text}\n")

    def read(self, *, offset: int = 0) -> tuple[list[LogLine], int]:
        """Lines from byte ``offset`` on (whole lines only) and the offset after the last one."""
        with self._lock, self.path.open("rb") as log:
            log.seek(offset)
            data = log.read()
        end = data.rfind(b"\n") + 1
        lines = [parse_cri_line(raw) for raw in data[:end].decode("utf-8").splitlines()]
        return lines, offset + end

    def tail_message(self) -> str:
        """The kubelet's FallbackToLogsOnError message: the last lines, capped in lines and bytes."""
        lines, _ = self.read()
        text = "\n".join(line.text for line in lines[-FALLBACK_MESSAGE_LINES:])
        encoded = text.encode()[-FALLBACK_MESSAGE_BYTES:]
        return encoded.decode(errors="ignore")


def parse_cri_line(raw: str) -> LogLine:
    """Parse ``<time> <stream> <F|P> <text>``."""
    timestamp, stream, _tag, text = [*raw.split(" ", 3), ""][:4]
    return LogLine(time=parse_timestamp(timestamp), stream=stream, text=text)


@dataclass(frozen=True, kw_only=True)
class LogQuery:
    """The options of the kubelet's ``/containerLogs`` endpoint (a subset of PodLogOptions)."""

    follow: bool = False
    """Keep streaming until the container ends."""
    timestamps: bool = False
    """Prefix each line with its RFC 3339 time."""
    tail_lines: int | None = None
    """Only the last N lines."""
    since: datetime | None = None
    """Only lines at or after this time (from sinceTime or sinceSeconds)."""
    limit_bytes: int | None = None
    """Stop after this many bytes."""


def render(lines: list[LogLine], query: LogQuery) -> Iterator[bytes]:
    """The bytes the API returns for ``lines`` under ``query`` (tail and byte limit applied by the caller)."""
    for line in lines:
        if query.since is not None and line.time < query.since:
            continue
        prefix = f"{rfc3339_nano(line.time)} " if query.timestamps else ""
        yield f"{prefix}{line.text}\n".encode()
