"""Decode a pprof profile (``profile.proto``, as Go's ``runtime/pprof`` and Pyroscope write it). Pure.

The message classes are built here from a descriptor of the schema's subset this module reads; the
field numbers are those of the published format (github.com/google/pprof, ``proto/profile.proto``),
which Go's ``runtime/pprof/proto.go`` writes. Fields left out (mappings, labels, file names, ...) are
kept by the parser as unknown fields and ignored.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

# Decompressed profiles larger than this are refused, so a small gzip bomb cannot exhaust memory;
# the scheduler's profiles of a scenario window are a few MiB.
MAX_DECOMPRESSED_BYTES: Final = 256 * 2**20
# A gzip stream's first two bytes. A protobuf message cannot start with them: 0x1f would be field 3
# with wire type 7, which does not exist.
GZIP_MAGIC: Final = b"\x1f\x8b"


class ProfileError(ValueError):
    """The bytes are no pprof profile this module can read; the message says what is wrong."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ValueType:
    """What a sample value (or the period) measures, e.g. ``cpu`` in ``nanoseconds``."""

    type: str
    unit: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Sample:
    """One sample: a value per sample type, at a call stack."""

    values: tuple[int, ...]
    """One value per ``Profile.sample_types``, in their order."""
    stack: tuple[str, ...]
    """Function names, leaf first; an inlined call is a frame of its own, as in ``go tool pprof``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Profile:
    """A decoded profile: the sample types, when and how it was sampled, and the samples."""

    sample_types: tuple[ValueType, ...]
    period_type: ValueType | None
    """What ``period`` measures; None when the profile does not say."""
    period: int
    """The sampling period, e.g. 10 ms of CPU between samples."""
    time_nanos: int
    """When the profile's window started, in nanoseconds since the epoch; 0 when unknown."""
    duration_nanos: int
    """The window's length in nanoseconds; 0 when unknown."""
    samples: tuple[Sample, ...]

    def value_index(self, sample_type: str) -> int:
        """The position of the sample type named ``sample_type`` in each sample's values."""
        for index, value_type in enumerate(self.sample_types):
            if value_type.type == sample_type:
                return index
        known = ", ".join(f"{t.type}/{t.unit}" for t in self.sample_types) or "none"
        raise ProfileError(f"the profile has no sample type {sample_type!r}; it has: {known}")


def decode_profile(data: bytes) -> Profile:
    """The profile in ``data``: gzip-compressed (as ``runtime/pprof`` writes it) or raw protobuf.

    :raises ProfileError: for anything malformed, with what is wrong.
    """
    if not data:
        raise ProfileError("empty input: no profile")
    raw = _gunzip(data) if data.startswith(GZIP_MAGIC) else data
    try:
        parsed: _ProfileFields = ProfileMessage.FromString(raw)
    except message.DecodeError as error:
        raise ProfileError(f"not a pprof profile: {error}") from error
    return _profile(parsed)


def _gunzip(data: bytes) -> bytes:
    """``data`` decompressed; every gzip member of it, as Go's reader reads them."""
    out = bytearray()
    rest = data
    while rest:
        decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            # One byte over the cap tells a stream that exceeds it from one that just fits.
            out += decompressor.decompress(rest, MAX_DECOMPRESSED_BYTES - len(out) + 1)
        except zlib.error as error:
            raise ProfileError(f"not a valid gzip stream: {error}") from error
        if len(out) > MAX_DECOMPRESSED_BYTES:
            raise ProfileError(f"the profile decompresses to more than {MAX_DECOMPRESSED_BYTES} bytes")
        if not decompressor.eof:
            raise ProfileError("truncated gzip stream: it ends before its end marker")
        rest = decompressor.unused_data
    return bytes(out)


def _profile(parsed: _ProfileFields) -> Profile:
    strings = list(parsed.string_table)
    if not strings or strings[0] != "":
        raise ProfileError("malformed string table: its first string must be the empty string")

    def string(index: int, what: str) -> str:
        if not 0 <= index < len(strings):
            raise ProfileError(f"{what} is string {index}, outside the string table's {len(strings)} strings")
        return strings[index]

    def value_type(fields: _ValueTypeFields, what: str) -> ValueType:
        return ValueType(
            type=string(fields.type, f"{what}'s type"), unit=string(fields.unit, f"{what}'s unit")
        )

    functions = _by_id(parsed.function, "function")
    names = {id_: string(function.name, f"function {id_}'s name") for id_, function in functions.items()}
    frames = {id_: _frames(location, names) for id_, location in _by_id(parsed.location, "location").items()}
    sample_types = tuple(
        value_type(fields, f"sample type {i}") for i, fields in enumerate(parsed.sample_type)
    )
    samples = []
    for i, sample in enumerate(parsed.sample):
        if len(sample.value) != len(sample_types):
            raise ProfileError(
                f"sample {i} has {len(sample.value)} values for {len(sample_types)} sample types"
            )
        stack: list[str] = []
        for location_id in sample.location_id:
            if location_id not in frames:
                raise ProfileError(
                    f"sample {i} is at location {location_id}, which the profile does not have"
                )
            stack.extend(frames[location_id])
        samples.append(Sample(values=tuple(sample.value), stack=tuple(stack)))
    return Profile(
        sample_types=sample_types,
        period_type=value_type(parsed.period_type, "the period type")
        if parsed.HasField("period_type")
        else None,
        period=parsed.period,
        time_nanos=parsed.time_nanos,
        duration_nanos=parsed.duration_nanos,
        samples=tuple(samples),
    )


def _by_id(entries: Sequence[_Entry], what: str) -> dict[int, _Entry]:
    found: dict[int, _Entry] = {}
    for entry in entries:
        if entry.id in found:
            raise ProfileError(f"two {what}s have the id {entry.id}")
        found[entry.id] = entry
    return found


def _frames(location: _LocationFields, names: Mapping[int, str]) -> tuple[str, ...]:
    """The location's frames, leaf first: its lines (the first inlined into the next, ...).

    A location without lines (an address the profiler did not symbolize) is one frame named by its
    address in hex, so its samples keep their place; Go's runtime and Pyroscope symbolize theirs.
    """
    if not location.line:
        return (f"0x{location.address:x}",)
    for line in location.line:
        if line.function_id not in names:
            raise ProfileError(
                f"location {location.id} is in function {line.function_id}, which the profile does not have"
            )
    return tuple(names[line.function_id] for line in location.line)


# The typed view of the parsed messages: the fields this module reads, as the classes built below
# have them (the protobuf runtime's classes are dynamic and untyped).
class _ValueTypeFields(Protocol):
    type: int
    unit: int


class _Identified(Protocol):
    @property
    def id(self) -> int: ...


_Entry = TypeVar("_Entry", bound=_Identified)


class _FunctionFields(_Identified, Protocol):
    name: int


class _LineFields(Protocol):
    function_id: int


class _LocationFields(_Identified, Protocol):
    address: int
    line: Sequence[_LineFields]


class _SampleFields(Protocol):
    location_id: Sequence[int]
    value: Sequence[int]


class _ProfileFields(Protocol):
    sample_type: Sequence[_ValueTypeFields]
    sample: Sequence[_SampleFields]
    location: Sequence[_LocationFields]
    function: Sequence[_FunctionFields]
    string_table: Sequence[str]
    time_nanos: int
    duration_nanos: int
    period_type: _ValueTypeFields
    period: int

    def HasField(self, name: str) -> bool: ...


_Field = descriptor_pb2.FieldDescriptorProto
# (message, [(field, number, type, repeated, message type)]): profile.proto's fields this module
# reads. Repeated scalars are packed (proto3), which Go mixes with unpacked; the parser reads both.
_SCHEMA: Final[dict[str, list[tuple[str, int, int, bool, str | None]]]] = {
    "Profile": [
        ("sample_type", 1, _Field.TYPE_MESSAGE, True, "ValueType"),
        ("sample", 2, _Field.TYPE_MESSAGE, True, "Sample"),
        ("location", 4, _Field.TYPE_MESSAGE, True, "Location"),
        ("function", 5, _Field.TYPE_MESSAGE, True, "Function"),
        ("string_table", 6, _Field.TYPE_STRING, True, None),
        ("time_nanos", 9, _Field.TYPE_INT64, False, None),
        ("duration_nanos", 10, _Field.TYPE_INT64, False, None),
        ("period_type", 11, _Field.TYPE_MESSAGE, False, "ValueType"),
        ("period", 12, _Field.TYPE_INT64, False, None),
    ],
    "ValueType": [("type", 1, _Field.TYPE_INT64, False, None), ("unit", 2, _Field.TYPE_INT64, False, None)],
    "Sample": [
        ("location_id", 1, _Field.TYPE_UINT64, True, None),
        ("value", 2, _Field.TYPE_INT64, True, None),
    ],
    "Location": [
        ("id", 1, _Field.TYPE_UINT64, False, None),
        ("address", 3, _Field.TYPE_UINT64, False, None),
        ("line", 4, _Field.TYPE_MESSAGE, True, "Line"),
    ],
    "Line": [("function_id", 1, _Field.TYPE_UINT64, False, None)],
    "Function": [("id", 1, _Field.TYPE_UINT64, False, None), ("name", 2, _Field.TYPE_INT64, False, None)],
}
_PACKAGE: Final = "perftools.profiles"


def _profile_class() -> Any:  # the protobuf runtime's classes are dynamic: the Protocols above type them
    file = descriptor_pb2.FileDescriptorProto(name="kai_scale/pprof.proto", package=_PACKAGE, syntax="proto3")
    for name, fields in _SCHEMA.items():
        declared = file.message_type.add(name=name)
        for field, number, type_, repeated, type_name in fields:
            declared.field.add(
                name=field,
                number=number,
                type=type_,
                label=_Field.LABEL_REPEATED if repeated else _Field.LABEL_OPTIONAL,
                type_name=f".{_PACKAGE}.{type_name}" if type_name else None,
            )
    # A pool of our own: another library's profile.proto in the default pool cannot clash with ours.
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.Profile"))


ProfileMessage: Final = _profile_class()
"""The protobuf class of a ``Profile`` message (the fields of ``_SCHEMA``), e.g. to write one."""
