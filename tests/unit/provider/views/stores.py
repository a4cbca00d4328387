"""A results store in memory for the view's tests: S3's answers, and a count of what was asked."""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any, Literal

from kai_scale.hooks.results_bucket import Unchanged, Versioned


class CountingStore:
    """Objects in memory with S3's ETags; counts full reads and unchanged answers per key."""

    bucket = "kai-scale-results"

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.reads: dict[str, int] = {}
        self.unchanged: dict[str, int] = {}
        self.lock = threading.Lock()

    def put(self, key: str, document: Any) -> None:
        self.objects[key] = json.dumps(document).encode()

    def _count(self, counter: dict[str, int], key: str) -> None:
        with self.lock:
            counter[key] = counter.get(key, 0) + 1

    def read_bytes(self, key: str) -> bytes | None:
        self._count(self.reads, key)
        return self.objects.get(key)

    def read_if_changed(
        self, key: str, *, etag: str | None
    ) -> Versioned | Literal[Unchanged.UNCHANGED] | None:
        body = self.objects.get(key)
        if body is None:
            return None
        tag = hashlib.md5(body).hexdigest()  # what S3 gives a single-part object as its ETag
        if tag == etag:
            self._count(self.unchanged, key)
            return Unchanged.UNCHANGED
        self._count(self.reads, key)
        return Versioned(body=body, etag=tag)
