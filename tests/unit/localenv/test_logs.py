from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

from localenv.runner_kubelet.log_server import parse_query
from localenv.runner_kubelet.logs import (
    FALLBACK_MESSAGE_BYTES,
    ContainerLog,
    LogLine,
    LogQuery,
    parse_timestamp,
    render,
    rfc3339_nano,
)


def test_timestamps_round_trip_at_microsecond_precision() -> None:
    moment = datetime(2026, 11, 22, 3, 4, 5, 123456, tzinfo=UTC)
    assert rfc3339_nano(moment) == "2026-11-22T03:04:05.123456000Z"
    assert parse_timestamp(rfc3339_nano(moment)) == moment
    assert parse_timestamp("2026-11-22T03:04:05Z") == moment.replace(microsecond=0)
    assert parse_timestamp("2026-11-22T05:04:05.5+02:00") == datetime(
        2026, 11, 22, 3, 4, 5, 500000, tzinfo=UTC
    )


def test_log_keeps_streams_and_reads_from_an_offset(tmp_path: Path) -> None:
    log = ContainerLog(tmp_path / "c.log")
    log.pump(io.BytesIO(b"one\ntwo\npartial"), "stdout")
    log.pump(io.BytesIO(b"oops\n"), "stderr")
    lines, offset = log.read()
    assert [(line.stream, line.text) for line in lines] == [
        ("stdout", "one"),
        ("stdout", "two"),
        ("stdout", "partial"),
        ("stderr", "oops"),
    ]
    log.pump(io.BytesIO(b"three\n"), "stdout")
    later, _ = log.read(offset=offset)
    assert [line.text for line in later] == ["three"]


def test_fallback_message_is_the_tail_capped_in_bytes(tmp_path: Path) -> None:
    log = ContainerLog(tmp_path / "c.log")
    log.pump(io.BytesIO(b"".join(b"line %d %s\n" % (i, b"x" * 50) for i in range(200))), "stdout")
    message = log.tail_message()
    assert len(message.encode()) == FALLBACK_MESSAGE_BYTES
    assert message.endswith("line 199 " + "x" * 50)


def test_render_filters_by_time_and_prefixes_timestamps() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    lines = [LogLine(time=start + timedelta(seconds=i), stream="stdout", text=f"l{i}") for i in range(3)]
    query = LogQuery(timestamps=True, since=start + timedelta(seconds=1))
    assert b"".join(render(lines, query)) == (
        b"2026-01-01T00:00:01.000000000Z l1\n2026-01-01T00:00:02.000000000Z l2\n"
    )
    assert b"".join(render(lines, LogQuery())) == b"l0\nl1\nl2\n"


def test_query_string_as_the_api_server_forwards_it() -> None:
    query = parse_query(
        "follow=true&timestamps=true&tailLines=10&sinceTime=2026-01-01T00%3A00%3A00Z&limitBytes=5"
    )
    assert query == LogQuery(
        follow=True, timestamps=True, tail_lines=10, since=datetime(2026, 1, 1, tzinfo=UTC), limit_bytes=5
    )
