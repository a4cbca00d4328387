"""The reader's caching, against a store that counts what it is asked (S3 itself: the browser test)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal

import pytest
from botocore.exceptions import EndpointConnectionError

from kai_scale.hooks.results_bucket import Unchanged, Versioned
from kai_scale.publishing.manifest import ManifestError
from kai_scale.views.reader import ReadError, ResultsReader
from kai_scale.views.runs import RunRow
from tests.unit.provider.views.stores import CountingStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _entry(run_id: str, *, status: str = "success", verdict: str = "pass") -> dict[str, Any]:
    return {
        "timestamp": f"2026-11-{run_id[-2:]}T02:00:00Z",
        "path": f"Public/{run_id}/results.json",
        "run_id": run_id,
        "node_count": 500,
        "status": status,
        "verdict": verdict,
    }


def _results(*failed: str) -> dict[str, Any]:
    tests = [{"test_name": name, "status": "failure", "details": {"scenario": name}} for name in failed]
    return {"results": {"status": "failure" if failed else "success", "tests": tests}}


@pytest.fixture
def store() -> CountingStore:
    store = CountingStore()
    store.put("Public/manifest.json", {"runs": [_entry("run-21"), _entry("run-22", status="failure")]})
    store.put("Public/run-21/results.json", _results())
    store.put("Public/run-22/results.json", _results("reclaim"))
    return store


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_the_manifest_is_checked_again_only_after_its_age_and_parsed_only_when_changed(
    store: CountingStore, clock: Clock
) -> None:
    reader = ResultsReader(store=store, prefix="Public/", manifest_max_age=30, clock=clock)
    assert [row.run_id for row in reader.runs()] == ["run-22", "run-21"]
    clock.now += 29
    reader.runs()
    assert (store.reads["Public/manifest.json"], store.unchanged.get("Public/manifest.json")) == (1, None)
    clock.now += 2
    reader.runs()
    assert (store.reads["Public/manifest.json"], store.unchanged["Public/manifest.json"]) == (1, 1)
    store.put("Public/manifest.json", {"runs": [_entry("run-21"), _entry("run-22"), _entry("run-23")]})
    clock.now += 31
    assert [row.run_id for row in reader.runs()] == ["run-23", "run-22", "run-21"]
    assert store.reads["Public/manifest.json"] == 2


def test_no_manifest_yet_is_no_runs(clock: Clock) -> None:
    assert ResultsReader(store=CountingStore(), prefix="Public/", clock=clock).runs() == []


def test_a_runs_documents_are_read_once_until_its_entry_changes(store: CountingStore, clock: Clock) -> None:
    reader = ResultsReader(store=store, prefix="Public/", manifest_max_age=0, clock=clock)
    failed = reader.run("run-22")
    assert failed is not None
    assert reader.failed_scenarios(failed) == ["reclaim"]
    assert reader.failed_scenarios(failed) == ["reclaim"]
    assert store.reads["Public/run-22/results.json"] == 1
    # Published again (a scenario retried): the objects first, then the entry.
    store.put("Public/run-22/results.json", _results())
    store.put("Public/manifest.json", {"runs": [_entry("run-21"), _entry("run-22", status="success")]})
    republished = reader.run("run-22")
    assert republished is not None
    assert reader.failed_scenarios(republished) == []
    assert reader.results(republished) == _results()
    assert store.reads["Public/run-22/results.json"] == 2


def test_a_successful_run_has_no_failed_scenarios_to_read(store: CountingStore, clock: Clock) -> None:
    reader = ResultsReader(store=store, prefix="Public/", clock=clock)
    passed = reader.run("run-21")
    assert passed is not None
    assert reader.failed_scenarios(passed) == []
    assert "Public/run-21/results.json" not in store.reads


def test_missing_or_unreadable_documents_are_none_and_kept(store: CountingStore, clock: Clock) -> None:
    store.objects["Public/run-21/verdicts.json"] = b"{not json"
    reader = ResultsReader(store=store, prefix="Public/", clock=clock)
    row = reader.run("run-21")
    assert row is not None
    assert (reader.verdicts(row), reader.metrics(row), reader.summary(row)) == (None, None, None)
    assert reader.verdicts(row) is None
    assert store.reads["Public/run-21/verdicts.json"] == 1
    assert store.reads["runs/run-21/run-summary.json"] == 1


def test_only_so_many_documents_are_kept(store: CountingStore, clock: Clock) -> None:
    reader = ResultsReader(store=store, prefix="Public/", documents=1, clock=clock)
    first, second = reader.runs()
    for row in (first, second, first):
        reader.results(row)
    assert store.reads["Public/run-22/results.json"] == 2


def test_reads_run_at_once_in_threads(store: CountingStore, clock: Clock) -> None:
    reader = ResultsReader(store=store, prefix="Public/", clock=clock)
    names = reader.each(lambda row: threading.current_thread().name, reader.runs())
    assert all(name.startswith("kai-scale-view-read") for name in names)


def test_a_manifest_that_is_not_one_is_refused(store: CountingStore, clock: Clock) -> None:
    store.put("Public/manifest.json", ["not", "a", "manifest"])
    with pytest.raises(ManifestError, match=r"Public/manifest\.json is not a manifest"):
        ResultsReader(store=store, prefix="Public/", clock=clock).runs()


def test_a_bucket_that_cannot_be_read_is_named(clock: Clock) -> None:
    class Unreachable(CountingStore):
        def read_if_changed(
            self, key: str, *, etag: str | None
        ) -> Versioned | Literal[Unchanged.UNCHANGED] | None:
            raise EndpointConnectionError(endpoint_url="http://s3.example:9000")

    with pytest.raises(
        ReadError, match=r"could not read s3://kai-scale-results/Public/manifest.json: .*s3.example"
    ):
        ResultsReader(store=Unreachable(), prefix="Public/", clock=clock).runs()


class Gated(CountingStore):
    """A store whose manifest reads wait until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = threading.Event()
        self.gate = threading.Event()

    def read_if_changed(
        self, key: str, *, etag: str | None
    ) -> Versioned | Literal[Unchanged.UNCHANGED] | None:
        self.reading.set()
        assert self.gate.wait(timeout=10), "the test never opened the gate"
        return super().read_if_changed(key, etag=etag)


def _in_thread(call: Callable[[], list[RunRow]]) -> tuple[threading.Thread, list[list[RunRow]]]:
    answers: list[list[RunRow]] = []
    thread = threading.Thread(target=lambda: answers.append(call()))
    thread.start()
    return thread, answers


def test_while_one_request_reads_the_manifest_again_the_others_get_the_one_held(clock: Clock) -> None:
    store = Gated()
    store.put("Public/manifest.json", {"runs": [_entry("run-21")]})
    reader = ResultsReader(store=store, prefix="Public/", manifest_max_age=30, clock=clock)
    store.gate.set()
    held = reader.runs()
    store.gate.clear()
    store.reading.clear()
    store.put("Public/manifest.json", {"runs": [_entry("run-21"), _entry("run-22")]})
    clock.now += 31
    reading, answers = _in_thread(reader.runs)
    assert store.reading.wait(timeout=10)
    # The GET is under way: another request is not held up by it, nor does it read again.
    assert reader.runs() is held
    store.gate.set()
    reading.join(timeout=10)
    assert [row.run_id for row in answers[0]] == ["run-22", "run-21"]
    assert [row.run_id for row in reader.runs()] == ["run-22", "run-21"]
    assert store.reads["Public/manifest.json"] == 2


def test_requests_before_the_first_read_wait_for_it_and_it_is_read_once(clock: Clock) -> None:
    store = Gated()
    store.put("Public/manifest.json", {"runs": [_entry("run-21")]})
    reader = ResultsReader(store=store, prefix="Public/", clock=clock)
    first, first_answers = _in_thread(reader.runs)
    assert store.reading.wait(timeout=10)
    second, second_answers = _in_thread(reader.runs)
    store.gate.set()
    for thread in (first, second):
        thread.join(timeout=10)
    assert [[row.run_id for row in rows] for rows in (*first_answers, *second_answers)] == [["run-21"]] * 2
    assert store.reads["Public/manifest.json"] == 1
