"""What ``go tool pprof`` reads in a profile file: its ``-raw`` listing and ``-top`` table, parsed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

# -top's values in the profile's own unit, not scaled (s, ms, MB, ...), so they compare exactly.
_TOP_UNITS = {"nanoseconds": "ns", "bytes": "B"}
_VALUE = r"(-?\d+)(?:ns|B)?"
_TOP_ROW = re.compile(rf"^\s*{_VALUE}\s+\S+%\s+\S+%\s+{_VALUE}\s+\S+%\s+(.+?)(?: \(inline\))?$")


@dataclass(frozen=True, kw_only=True)
class RawListing:
    """``go tool pprof -raw``: the profile as pprof's own decoder read it."""

    period_type: tuple[str, str]
    period: int
    time: str
    """As Go prints a time.Time, in UTC."""
    sample_types: tuple[tuple[str, str], ...]
    samples: Counter[tuple[tuple[int, ...], tuple[str, ...]]]
    """(values, stack of function names leaf first, inlined frames expanded): how many such samples."""


@dataclass(frozen=True, kw_only=True)
class TopTable:
    """``go tool pprof -top`` of one sample type, every node (``-trim=false``)."""

    total: int
    flat: dict[str, int]
    """Per function its flat value; functions whose flat value is 0 left out."""
    cumulative: dict[str, int]
    """Per function its cumulative value; functions whose cumulative value is 0 left out."""
    duration_seconds: float | None
    """The profile's duration as -top prints it (to 10 ms); None when it prints none."""


@dataclass
class GoPprof:
    """Runs ``go tool pprof`` (once per question: each run takes about half a second)."""

    go: str
    _raw: dict[Path, RawListing] = field(default_factory=dict)
    _top: dict[tuple[Path, str, str], TopTable] = field(default_factory=dict)

    @classmethod
    def find(cls) -> GoPprof:
        """The Go toolchain on the PATH: the repository builds Go, so its checks have it."""
        go = shutil.which("go")
        assert go, "go is not on the PATH: the decoder's tests compare it with `go tool pprof`"
        return cls(go=go)

    def raw(self, path: Path) -> RawListing:
        """``path``'s ``-raw`` listing."""
        if path not in self._raw:
            self._raw[path] = _parse_raw(self._run("-raw", str(path)))
        return self._raw[path]

    def top(self, path: Path, sample_type: str, unit: str) -> TopTable:
        """``path``'s ``-top`` table of ``sample_type``, whose values are in ``unit``."""
        key = (path, sample_type, unit)
        if key not in self._top:
            units = [f"-unit={_TOP_UNITS[unit]}"] if unit in _TOP_UNITS else []
            self._top[key] = _parse_top(
                self._run("-top", "-trim=false", f"-sample_index={sample_type}", *units, str(path))
            )
        return self._top[key]

    def _run(self, *args: str) -> str:
        # The first run of a fresh Go cache builds pprof: about a minute on a busy 2-core machine.
        result = subprocess.run(
            [self.go, "tool", "pprof", *args],
            env={**os.environ, "TZ": "UTC"},
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout


def go_time(nanos: int) -> str:
    """``nanos`` since the epoch as Go prints a time.Time in UTC: trailing zeros of the fraction cut."""
    seconds, fraction = divmod(nanos, 10**9)
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")
    digits = f"{fraction:09d}".rstrip("0")
    return f"{text}{'.' + digits if digits else ''} +0000 UTC"


def _parse_raw(text: str) -> RawListing:
    lines = text.splitlines()
    header = dict(line.split(": ", 1) for line in lines[: lines.index("Samples:")] if ": " in line)
    type_, unit = header["PeriodType"].split()
    sample_types = tuple(
        (name, unit_) for name, unit_ in (t.split("/") for t in lines[lines.index("Samples:") + 1].split())
    )
    stacks: list[tuple[tuple[int, ...], list[int]]] = []
    names: dict[int, list[str]] = {}
    section = "samples"
    location = 0
    for line in lines[lines.index("Samples:") + 2 :]:
        if line in ("Locations", "Mappings"):
            section = line
        elif section == "samples" and (sample := re.fullmatch(r"\s*([-\d ]+): ([\d ]+?)\s*", line)):
            values, ids = sample.groups()
            stacks.append((tuple(int(v) for v in values.split()), [int(i) for i in ids.split()]))
        elif section == "Locations" and (head := re.fullmatch(r"\s*(\d+): 0x[0-9a-f]+ M=\d+ ?(.*)", line)):
            location = int(head.group(1))
            names[location] = [head.group(2).split()[0]]
        elif section == "Locations":
            # An inlined frame of the location above: "name file:line:column s=start".
            names[location].append(line.split()[0])
    return RawListing(
        period_type=(type_, unit),
        period=int(header["Period"]),
        time=header["Time"],
        sample_types=sample_types,
        samples=Counter(
            (values, tuple(name for id_ in ids for name in names[id_])) for values, ids in stacks
        ),
    )


def _parse_top(text: str) -> TopTable:
    total = re.search(rf"of {_VALUE} total", text)
    assert total, text
    duration = re.search(r"^Duration: ([\d.]+)s,", text, re.MULTILINE)
    flat: dict[str, int] = {}
    cumulative: dict[str, int] = {}
    rows = text.split("cum%\n", 1)[1].splitlines()
    for row in rows:
        found = _TOP_ROW.fullmatch(row)
        assert found, f"unexpected -top row: {row!r}"
        flat_value, cumulative_value, name = int(found.group(1)), int(found.group(2)), found.group(3)
        if flat_value:
            flat[name] = flat_value
        if cumulative_value:
            cumulative[name] = cumulative_value
    return TopTable(
        total=int(total.group(1)),
        flat=flat,
        cumulative=cumulative,
        duration_seconds=float(duration.group(1)) if duration else None,
    )
