"""A scenario's profiles over its window: what is recorded for each answer Pyroscope may give."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from kai_scale.metrics.collection import Window
from kai_scale.profiles.collection import (
    PROFILE_TYPES,
    QUERYABLE_AFTER,
    CollectedProfile,
    MissingProfile,
    ProfileType,
    RunProfiles,
    collect_scenario,
    profile_files,
    profiles_to_publish,
    queryable_at,
    without_gone_files,
)
from kai_scale.profiles.pprof import ProfileMessage, decode_profile
from kai_scale.profiles.pyroscope_api import PyroscopeClient, PyroscopeError
from kai_scale.profiles.task import ProfileFetcher
from tests.unit.provider.profiles.builder import HEAP, HEAVY3, profile_bytes

START = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
WINDOW = Window(start=START, end=START + timedelta(minutes=3), source="runner")
SERVICE = "kai-scheduler"
# What Pyroscope answers: raw (not gzip-compressed) profiles, one of each type.
CPU = gzip.decompress(HEAVY3.read_bytes())
HEAP_RAW = gzip.decompress(HEAP.read_bytes())


def _answers(by_type: dict[str, bytes | PyroscopeError]) -> Callable[[ProfileType, Window], bytes]:
    def fetch(profile_type: ProfileType, window: Window) -> bytes:
        assert window == WINDOW
        answer = by_type[profile_type.sample_type]
        if isinstance(answer, PyroscopeError):
            raise answer
        return answer

    return fetch


def test_each_profile_is_kept_gzipped_beside_its_summary() -> None:
    fetch = _answers({"cpu": CPU, "alloc_space": HEAP_RAW, "inuse_space": HEAP_RAW})
    collected = collect_scenario(fetch, scenario="fill", service=SERVICE, window=WINDOW)
    entry = collected.entry
    assert (entry.status, entry.reason, entry.window) == ("collected", None, WINDOW.to_entry())
    cpu = entry.profiles["cpu"]
    assert isinstance(cpu, CollectedProfile)
    assert cpu.file == "profiles/fill/cpu.pb.gz"
    assert cpu.summary.sample_type == "cpu"
    assert cpu.summary.top_flat[0].function == "main.heavy"
    assert set(collected.files) == {f"profiles/fill/{name}.pb.gz" for name in PROFILE_TYPES}
    # As go tool pprof opens it: the very bytes Pyroscope sent, gzipped.
    assert gzip.decompress(collected.files["profiles/fill/cpu.pb.gz"]) == CPU
    inuse = entry.profiles["inuse_space"]
    assert isinstance(inuse, CollectedProfile)
    assert (inuse.summary.sample_type, inuse.summary.unit) == ("inuse_space", "bytes")


def test_a_window_without_samples_a_refusal_and_an_answer_that_is_no_profile_each_say_why() -> None:
    empty = profile_bytes([])
    refused = PyroscopeError("Pyroscope at http://p:4040 refused the alloc profile: HTTP 400: bad")
    fetch = _answers({"cpu": empty, "alloc_space": refused, "inuse_space": b"\x1f\x8bnot gzip"})
    collected = collect_scenario(fetch, scenario="fill", service=SERVICE, window=WINDOW)
    entry = collected.entry
    assert (entry.status, entry.reason) == ("missing", "not collected: cpu, alloc_space, inuse_space")
    reasons = {
        name: profile.reason
        for name, profile in entry.profiles.items()
        if isinstance(profile, MissingProfile)
    }
    assert reasons["cpu"] == (
        "no samples of kai-scheduler in the window (does its scheduler push to this Pyroscope?)"
    )
    assert reasons["alloc_space"] == str(refused)
    assert reasons["inuse_space"].startswith("Pyroscope's answer is no profile: ")
    assert collected.files == {}


def test_pyroscopes_answers_for_a_window_without_data_are_no_samples() -> None:
    """As it answers here: an empty body, or a profile of one unnamed sample type and no samples.

    And samples whose values are all 0.
    """
    unnamed = ProfileMessage(string_table=[""])
    unnamed.sample_type.add(type=0, unit=0)
    zeros = profile_bytes([(("main.idle",), (0,))], sample_types=[("inuse_space", "bytes")])
    fetch = _answers({"cpu": b"", "alloc_space": unnamed.SerializeToString(), "inuse_space": zeros})
    entry = collect_scenario(fetch, scenario="fill", service=SERVICE, window=WINDOW).entry
    assert {p.reason for p in entry.profiles.values() if isinstance(p, MissingProfile)} == {
        "no samples of kai-scheduler in the window (does its scheduler push to this Pyroscope?)"
    }
    assert entry.status == "missing"


def test_one_profile_missing_is_a_partial_entry() -> None:
    fetch = _answers({"cpu": CPU, "alloc_space": HEAP_RAW, "inuse_space": PyroscopeError("timed out")})
    entry = collect_scenario(fetch, scenario="fill", service=SERVICE, window=WINDOW).entry
    assert (entry.status, entry.reason) == ("partial", "not collected: inuse_space")


def test_a_scenario_without_a_window_asks_nothing() -> None:
    def fetch(profile_type: ProfileType, window: Window) -> bytes:
        raise AssertionError("asked Pyroscope")

    collected = collect_scenario(fetch, scenario="fill", service=SERVICE, window=None)
    assert collected.entry.status == "missing"
    assert collected.entry.reason == "not collected: the scenario has no window (it did not run)"


def test_once_pyroscope_is_unreachable_no_later_profile_waits_for_it() -> None:
    """The fetcher over a client whose every request fails to connect (a stand-in: no request is sent)."""
    connects = []

    def connect() -> PyroscopeClient:
        connects.append(1)
        raise PyroscopeError(
            "Airflow connection 'pyroscope_default' (Pyroscope) is not defined", unreachable=True
        )

    pyroscope = ProfileFetcher(connect)
    first = collect_scenario(pyroscope, scenario="a", service=SERVICE, window=WINDOW)
    second = collect_scenario(pyroscope, scenario="b", service=SERVICE, window=WINDOW)
    assert connects == [1]
    for entry in (first.entry, second.entry):
        assert {p.reason for p in entry.profiles.values() if isinstance(p, MissingProfile)} == {
            "Airflow connection 'pyroscope_default' (Pyroscope) is not defined"
        }


def test_the_last_window_is_read_once_pyroscope_can_answer_for_it() -> None:
    later = Window(start=WINDOW.end, end=WINDOW.end + timedelta(minutes=2), source="task")
    assert queryable_at({"a": WINDOW, "b": later, "c": None}) == later.end + QUERYABLE_AFTER
    assert queryable_at({"c": None}) is None


def test_publishing_reads_the_document_and_names_its_files() -> None:
    fetch = _answers({"cpu": CPU, "alloc_space": HEAP_RAW, "inuse_space": PyroscopeError("timed out")})
    entry = collect_scenario(fetch, scenario="fill", service=SERVICE, window=WINDOW).entry
    written = RunProfiles(run_id="r1", scenarios={"fill": entry}).model_dump_json()
    document = profiles_to_publish(
        written, run_id="r1", scenarios=["fill"], source="s3://b/runs/r1/profiles.json"
    )
    assert document.scenarios["fill"] == entry
    assert profile_files(document) == ["profiles/fill/cpu.pb.gz", "profiles/fill/alloc_space.pb.gz"]


def test_a_profile_whose_file_is_gone_at_publishing_is_published_as_missing() -> None:
    both = _answers({"cpu": CPU, "alloc_space": HEAP_RAW, "inuse_space": PyroscopeError("timed out")})
    fill = collect_scenario(both, scenario="fill", service=SERVICE, window=WINDOW).entry
    only_cpu = _answers({"cpu": CPU, "alloc_space": b"", "inuse_space": b""})
    reclaim = collect_scenario(only_cpu, scenario="reclaim", service=SERVICE, window=WINDOW).entry
    document = RunProfiles(run_id="r1", scenarios={"fill": fill, "reclaim": reclaim})
    assert without_gone_files(document, []) is document

    gone = without_gone_files(document, ["profiles/fill/cpu.pb.gz", "profiles/reclaim/cpu.pb.gz"])

    assert profile_files(gone) == ["profiles/fill/alloc_space.pb.gz"]
    cpu = gone.scenarios["fill"].profiles["cpu"]
    assert cpu == MissingProfile(
        status="missing", reason="its file profiles/fill/cpu.pb.gz was gone from the bucket at publishing"
    )
    assert gone.scenarios["fill"].profiles["alloc_space"] == fill.profiles["alloc_space"]
    assert (gone.scenarios["fill"].status, gone.scenarios["fill"].reason) == (
        "partial",
        "not collected: cpu, inuse_space",
    )
    assert gone.scenarios["reclaim"].status == "missing"
    assert gone.scenarios["reclaim"].window == reclaim.window
    assert RunProfiles.read(gone.model_dump_json(), source="test") == gone, "still a valid document"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (None, "the collect_metrics task wrote no profiles (see its log)"),
        ('{"run_id": "r1", "scenar', "unreadable: profiles s3://b/p.json is not JSON (truncated?): "),
        ('{"run_id": "r1"}', "unreadable: profiles s3://b/p.json: 'scenarios' Field required"),
    ],
)
def test_profiles_never_written_or_unreadable_are_published_as_missing_saying_why(
    text: str | None, reason: str
) -> None:
    document = profiles_to_publish(text, run_id="r1", scenarios=["fill"], source="s3://b/p.json")
    entry = document.scenarios["fill"]
    assert entry.status == "missing"
    assert str(entry.reason).startswith(f"not collected: {reason}")
    assert profile_files(document) == []


def test_the_profile_types_are_those_kais_scheduler_pushes() -> None:
    """pyroscope-go's IDs (name:sample type:unit:period type:unit) of what cmd/scheduler/profiling starts."""
    assert {name: t.pyroscope_id for name, t in PROFILE_TYPES.items()} == {
        "cpu": "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
        "alloc_space": "memory:alloc_space:bytes:space:bytes",
        "inuse_space": "memory:inuse_space:bytes:space:bytes",
    }
    for profile_type in PROFILE_TYPES.values():
        assert profile_type.pyroscope_id.split(":")[1] == profile_type.sample_type
    assert decode_profile(CPU).value_index("cpu") == 1
