"""Decoding pprof profiles: the Go runtime's own, read as ``go tool pprof`` reads them, and bad input."""

from __future__ import annotations

import contextlib
import gzip
import random
import struct
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kai_scale.profiles.pprof import MAX_DECOMPRESSED_BYTES, ProfileError, ProfileMessage, decode_profile
from tests.unit.provider.profiles.builder import HEAP, HEAVY1, HEAVY3, LIGHT3, fixture
from tests.unit.provider.profiles.go_pprof import GoPprof, go_time


@pytest.mark.parametrize("path", [HEAVY3, HEAVY1, LIGHT3, HEAP], ids=lambda path: path.name)
def test_a_go_runtime_profile_decodes_to_what_go_tool_pprof_lists(path: Path, go_pprof: GoPprof) -> None:
    """Every sample (values, stack with inlined frames) and the header are those of ``pprof -raw``.

    pprof's own decoder is the reference of the format.
    """
    profile = fixture(path)
    listing = go_pprof.raw(path)
    assert tuple((t.type, t.unit) for t in profile.sample_types) == listing.sample_types
    assert profile.period_type is not None
    assert (profile.period_type.type, profile.period_type.unit) == listing.period_type
    assert profile.period == listing.period
    assert go_time(profile.time_nanos) == listing.time
    assert Counter((s.values, s.stack) for s in profile.samples) == listing.samples


def test_the_cpu_profiles_window_is_the_one_go_tool_pprof_prints(go_pprof: GoPprof) -> None:
    table = go_pprof.top(HEAVY3, "cpu", "nanoseconds")
    assert table.duration_seconds == pytest.approx(fixture(HEAVY3).duration_nanos / 1e9, abs=0.005)


def test_an_inlined_call_is_a_frame_of_its_own_inner_first() -> None:
    """Go's heap profile has locations of several lines; each line is a frame, as the stack ran.

    Here writeHeap is inlined into WriteHeapProfile, inlined into main.writeHeapProfile.
    """
    inlined = ("runtime/pprof.writeHeap", "runtime/pprof.WriteHeapProfile", "main.writeHeapProfile")
    stacks = [sample.stack for sample in fixture(HEAP).samples]
    assert any(stack[1:4] == inlined for stack in stacks)


def test_a_raw_protobuf_profile_decodes_as_its_gzip_file_does() -> None:
    """Pyroscope's API answers the protobuf itself; runtime/pprof writes it gzip-compressed."""
    compressed = HEAVY3.read_bytes()
    assert decode_profile(gzip.decompress(compressed)) == decode_profile(compressed)


def test_a_gzip_file_of_several_members_decodes_whole() -> None:
    """Go's gzip reader reads every member of a file, so a profile split over two is one profile."""
    raw = gzip.decompress(HEAVY3.read_bytes())
    half = len(raw) // 2
    assert decode_profile(gzip.compress(raw[:half]) + gzip.compress(raw[half:])) == decode_profile(raw)


def test_empty_input_is_no_profile() -> None:
    with pytest.raises(ProfileError, match="empty input"):
        decode_profile(b"")


def test_a_truncated_gzip_file_is_refused() -> None:
    data = HEAVY3.read_bytes()
    with pytest.raises(ProfileError, match="truncated gzip stream"):
        decode_profile(data[: len(data) // 2])


def test_bytes_after_the_gzip_stream_are_refused() -> None:
    with pytest.raises(ProfileError, match="not a valid gzip stream"):
        decode_profile(HEAVY3.read_bytes() + b"trailing garbage")


def _gzip_of_zeros(mebibytes: int) -> bytes:
    """A gzip file of ``mebibytes`` MiB of zeros, made without compressing them all.

    After a full flush deflate starts afresh, so each MiB compresses to the same bytes.
    """
    zeros = bytes(2**20)
    deflate = zlib.compressobj(9, wbits=-zlib.MAX_WBITS)
    block = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    last = deflate.flush()
    crc = 0
    for _ in range(mebibytes):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, no time, unknown OS
    return header + block * mebibytes + last + struct.pack("<II", crc, mebibytes * 2**20 % 2**32)


def test_a_gzip_bomb_is_refused_before_it_fills_memory() -> None:
    """A small gzip file that decompresses past the cap (a run of zeros) is refused at the cap."""
    assert gzip.decompress(_gzip_of_zeros(3)) == bytes(3 * 2**20)
    bomb = _gzip_of_zeros(MAX_DECOMPRESSED_BYTES // 2**20 + 1)
    assert len(bomb) < 2**20
    with pytest.raises(ProfileError, match=f"decompresses to more than {MAX_DECOMPRESSED_BYTES} bytes"):
        decode_profile(bomb)


@pytest.mark.parametrize("seed", range(20))
def test_random_bytes_are_refused(seed: int) -> None:
    data = random.Random(seed).randbytes(1000)
    with pytest.raises(ProfileError, match=r"not a pprof profile|string table"):
        decode_profile(data)


def test_gzip_compressed_random_bytes_are_refused() -> None:
    with pytest.raises(ProfileError, match=r"not a pprof profile|string table"):
        decode_profile(gzip.compress(random.Random(1).randbytes(1000)))


def test_every_cut_of_a_profile_decodes_or_raises_profile_error_only() -> None:
    """A profile cut short (a partial download) never escapes as another exception type.

    Some cuts still parse as protobuf; then what they lack is found.
    """
    raw = gzip.decompress(HEAVY1.read_bytes())
    for end in range(len(raw)):
        with contextlib.suppress(ProfileError):
            decode_profile(raw[:end])


def _edit(edit: Callable[[Any], None]) -> bytes:
    """The raw heavy3 fixture with ``edit`` applied to its decoded message."""
    message = ProfileMessage.FromString(gzip.decompress(HEAVY3.read_bytes()))
    edit(message)
    data: bytes = message.SerializeToString()
    return data


def _set_function_name(message: Any) -> None:
    message.function[0].name = len(message.string_table) + 5


def _set_sample_type_unit(message: Any) -> None:
    message.sample_type[1].unit = -1


def _add_a_value(message: Any) -> None:
    message.sample[0].value.append(1)


def _point_at_a_missing_location(message: Any) -> None:
    message.sample[0].location_id.append(999)


def _point_at_a_missing_function(message: Any) -> None:
    message.location[0].line[0].function_id = 999


def _repeat_a_location_id(message: Any) -> None:
    message.location[1].id = message.location[0].id


def _drop_the_string_table(message: Any) -> None:
    del message.string_table[:]


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (_set_function_name, r"function \d+'s name is string \d+, outside the string table's \d+ strings"),
        (_set_sample_type_unit, r"sample type 1's unit is string -1, outside the string table's"),
        (_add_a_value, r"sample 0 has 3 values for 2 sample types"),
        (_point_at_a_missing_location, r"sample 0 is at location 999, which the profile does not have"),
        (_point_at_a_missing_function, r"location \d+ is in function 999, which the profile does not have"),
        (_repeat_a_location_id, r"two locations have the id \d+"),
        (_drop_the_string_table, r"its first string must be the empty string"),
    ],
    ids=lambda value: value.__name__.strip("_") if callable(value) else None,
)
def test_a_well_formed_protobuf_that_breaks_the_profiles_rules_is_refused_saying_which(
    edit: Callable[[Any], None], reason: str
) -> None:
    with pytest.raises(ProfileError, match=reason):
        decode_profile(_edit(edit))
