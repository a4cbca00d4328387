"""Reading the published results for the view, and keeping what was read.

The manifest is re-checked at most every ``manifest_max_age`` seconds with a conditional GET (S3 sends
no body while it is unchanged), so a 10,000-run history is parsed once per change, not per page. One
request at a time re-reads it, outside the lock that guards what is held: the others are served the
manifest held meanwhile (a first read they wait for). A run's documents are kept by key *and*
manifest entry: the publisher writes a run's objects before its entry, so a run published again
comes back with a changed entry and its documents are read afresh.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from kai_scale.hooks.results_bucket import Unchanged, Versioned
from kai_scale.object_keys import manifest_key, run_summary_key
from kai_scale.profiles.flame import FlameGraph, flame_graph
from kai_scale.profiles.pprof import decode_profile
from kai_scale.publishing.manifest import parse_manifest
from kai_scale.views.runs import RunRow, failed_scenarios, run_rows

T = TypeVar("T")
Item = TypeVar("Item")
Value = TypeVar("Value")
# botocore's connection pool holds 10 connections: more threads would only wait for one.
READ_THREADS = 10


class ResultsStore(Protocol):
    """What the reader needs of the bucket (``ResultsBucketHook`` has it)."""

    bucket: str

    def read_bytes(self, key: str) -> bytes | None:
        """The object, or None when it does not exist."""

    def read_if_changed(
        self, key: str, *, etag: str | None
    ) -> Versioned | Literal[Unchanged.UNCHANGED] | None:
        """The object unless it still has ``etag``; None when it does not exist."""


class ReadError(RuntimeError):
    """The bucket could not be read; the message names the object and the error."""


@dataclass(frozen=True, kw_only=True)
class _Manifest:
    rows: list[RunRow]
    etag: str | None
    checked: float


class _Kept(Generic[Value]):
    """What was read of objects, by (key, manifest entry); the least recently used dropped beyond ``size``."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._kept: OrderedDict[tuple[str, RunRow], Value] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, RunRow]) -> tuple[bool, Value | None]:
        with self._lock:
            if key not in self._kept:
                return False, None
            self._kept.move_to_end(key)
            return True, self._kept[key]

    def put(self, key: tuple[str, RunRow], document: Value) -> None:
        with self._lock:
            self._kept[key] = document
            self._kept.move_to_end(key)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)


class ResultsReader:
    """The view's reads of the results bucket, cached; safe to call from several threads at once.

    :param store: the bucket.
    :param prefix: the published prefix (``Public/``).
    :param manifest_max_age: seconds a read manifest is used before it is checked again.
    :param documents: results, verdicts and run summary documents kept (tens of kB each once parsed):
        the failed runs a text search reads, the Trends windows, the runs opened.
    :param metrics_documents: metrics documents kept (about a MB each).
    :param flame_graphs: profiles' flame graphs kept (tens of kB each; drawing one decodes its profile).
    :param clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        *,
        store: ResultsStore,
        prefix: str,
        manifest_max_age: float = 30.0,
        documents: int = 4096,
        metrics_documents: int = 8,
        flame_graphs: int = 16,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.prefix = prefix
        self._max_age = manifest_max_age
        self._clock = clock
        self._manifest: _Manifest | None = None
        # Guards _manifest, held only to look at it or swap it; _refresh_lock makes one reader at a time.
        self._manifest_lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._documents: _Kept[dict[str, Any] | None] = _Kept(documents)
        self._metrics: _Kept[dict[str, Any] | None] = _Kept(metrics_documents)
        self._flame_graphs: _Kept[FlameGraph | None] = _Kept(flame_graphs)
        self._pool = ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="kai-scale-view-read")

    def _errors_named(self, key: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except (BotoCoreError, ClientError) as error:
            raise ReadError(f"could not read s3://{self.store.bucket}/{key}: {error}") from error

    def runs(self) -> list[RunRow]:
        """Every run of the manifest, newest first (none before the first run is published).

        Raises ManifestError when the manifest is not a manifest, ReadError when it cannot be read.
        """
        held = self._held()
        if held is not None and self._clock() - held.checked < self._max_age:
            return held.rows
        if held is None:
            self._refresh_lock.acquire()  # nothing to show until the first read
        elif not self._refresh_lock.acquire(blocking=False):
            return held.rows  # another request is reading it again
        try:
            held = self._held()
            now = self._clock()
            if held is not None and now - held.checked < self._max_age:
                return held.rows  # read again while this request waited
            fresh = self._read_manifest(held, now)
            with self._manifest_lock:
                self._manifest = fresh
            return fresh.rows
        finally:
            self._refresh_lock.release()

    def _held(self) -> _Manifest | None:
        with self._manifest_lock:
            return self._manifest

    def _read_manifest(self, held: _Manifest | None, now: float) -> _Manifest:
        """The manifest as the bucket has it: the held one if it is unchanged, else read and parsed."""
        key = manifest_key(self.prefix)
        read = self._errors_named(
            key, lambda: self.store.read_if_changed(key, etag=held.etag if held else None)
        )
        if read is Unchanged.UNCHANGED and held is not None:
            return _Manifest(rows=held.rows, etag=held.etag, checked=now)
        if isinstance(read, Versioned):
            return _Manifest(rows=run_rows(parse_manifest(read.body, key=key)), etag=read.etag, checked=now)
        return _Manifest(rows=[], etag=None, checked=now)

    def run(self, run_id: str) -> RunRow | None:
        """The manifest's run of that id, if there is one."""
        return next((row for row in self.runs() if row.run_id == run_id), None)

    def _document(self, cache: _Kept[dict[str, Any] | None], key: str, row: RunRow) -> dict[str, Any] | None:
        found, document = cache.get((key, row))
        if found:
            return document
        raw = self._errors_named(key, lambda: self.store.read_bytes(key))
        try:
            parsed = json.loads(raw) if raw is not None else None
        except ValueError:
            parsed = None  # an unreadable document shows as absent; the object link still opens it
        document = parsed if isinstance(parsed, dict) else None
        cache.put((key, row), document)
        return document

    def results(self, row: RunRow) -> dict[str, Any] | None:
        """The run's ``results.json``, or None when it is missing or not JSON."""
        return self._document(self._documents, row.keys.results, row)

    def verdicts(self, row: RunRow) -> dict[str, Any] | None:
        """The run's ``verdicts.json``, or None (runs published before verdicts have none)."""
        return self._document(self._documents, row.keys.verdicts, row)

    def metrics(self, row: RunRow) -> dict[str, Any] | None:
        """The run's ``metrics.json``, or None."""
        return self._document(self._metrics, row.keys.metrics, row)

    def summary(self, row: RunRow) -> dict[str, Any] | None:
        """The run summary the pipeline keeps under ``runs/`` (every scenario's entry), or None."""
        return self._document(self._documents, run_summary_key(row.run_id), row)

    def object_bytes(self, key: str) -> bytes | None:
        """A published object as it is stored (not kept: people open them rarely, and reports are large)."""
        return self._errors_named(key, lambda: self.store.read_bytes(key))

    def flame_graph(self, row: RunRow, key: str, sample_type: str) -> FlameGraph | None:
        """The flame graph of ``sample_type`` of the run's profile at ``key``; None when it does not exist.

        :raises ProfileError: when the object is no profile, or has no such sample type.
        """
        found, graph = self._flame_graphs.get((f"{key}#{sample_type}", row))
        if found:
            return graph
        data = self.object_bytes(key)
        graph = None if data is None else flame_graph(decode_profile(data), sample_type)
        self._flame_graphs.put((f"{key}#{sample_type}", row), graph)
        return graph

    def failed_scenarios(self, row: RunRow) -> list[str]:
        """The scenarios that failed in the run (none unless its status is ``failure``).

        As its manifest entry names them; for entries written before they did, as its ``results.json``
        does (read for the runs a page shows, never for a search).
        """
        if row.failed_scenarios is not None:
            return list(row.failed_scenarios)
        return failed_scenarios(self.results(row)) if row.status == "failure" else []

    def each(self, read: Callable[[Item], T], items: Sequence[Item]) -> list[T]:
        """``read`` of every item, several at once (S3 answers each request in tens of milliseconds)."""
        return list(self._pool.map(read, items))
