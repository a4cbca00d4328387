"""Publishing one run: its objects first, then its entry in the manifest, by conditional writes.

Two publishers at once never lose an entry: the manifest is read with its ETag and written back only if
unchanged (``If-Match``; ``If-None-Match: *`` for the first write), and re-read and retried otherwise.
Transient S3 errors are retried by the client (botocore's standard retry mode).
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from kai_scale.hooks.results_bucket import BINARY_CONTENT_TYPE, ObjectChanged, ResultsBucketHook
from kai_scale.object_keys import PublishedKeys, manifest_key, published_keys, run_file_key
from kai_scale.publishing.manifest import empty_manifest, manifest_text, parse_manifest, upsert_run
from kai_scale.publishing.reports import merge_reports

MANIFEST_ATTEMPTS = 50
# Reports are tens of MB; the merge spills to disk beyond this.
REPORT_MEMORY_BYTES = 32 * 1024 * 1024


class PublishError(RuntimeError):
    """The bucket could not be written; the manifest, written last, is unchanged."""


class ManifestConflictError(RuntimeError):
    """Other publishers kept changing the manifest; nothing was written over them."""


@dataclass(frozen=True, kw_only=True)
class PublishedRun:
    """Where a run was published, and what could not be included."""

    keys: PublishedKeys
    manifest_key: str
    manifest_attempts: int
    """Conditional writes it took to add the entry (1 without contention)."""
    problems: list[str]
    """Ginkgo reports left out of the merged ginkgo-report.json, and why."""


def copy_run_files(bucket: ResultsBucketHook, *, prefix: str, run_id: str, files: Sequence[str]) -> list[str]:
    """Copy the run's ``files`` from its folder under ``runs/`` beside its results; return those gone.

    Each is named relative to the run's folder (e.g. ``profiles/<scenario>/cpu.pb.gz``) and copied as it
    is, by the bucket (no byte passes through the worker), before the results are written, so they name
    only files that were published. Bucket errors are raised as the client raises them (the task names
    them: ``ResultsBucketHook.errors_named``); a copy made before one is overwritten when the task runs
    again.
    """
    keys = published_keys(prefix=prefix, run_id=run_id)
    return [
        file
        for file in files
        if not bucket.copy(
            source=run_file_key(run_id, file), key=keys.beside(file), content_type=BINARY_CONTENT_TYPE
        )
    ]


def publish_run(
    bucket: ResultsBucketHook,
    *,
    prefix: str,
    run_id: str,
    results: Mapping[str, Any],
    metrics_text: str,
    verdicts: Mapping[str, Any],
    ginkgo_report_keys: Mapping[str, str | None],
    entry: Mapping[str, Any],
    sleep: Callable[[float], None] = time.sleep,
) -> PublishedRun:
    """Write results.json, ginkgo-report.json, metrics.json under ``<prefix><run-id>/``, then the entry.

    Publishing the same run again overwrites its objects and its entry in place.

    :param ginkgo_report_keys: each scenario's Ginkgo report key (None when it has none).
    """
    keys = published_keys(prefix=prefix, run_id=run_id)
    try:
        with tempfile.SpooledTemporaryFile(max_size=REPORT_MEMORY_BYTES) as report:
            problems = merge_reports(
                ginkgo_report_keys,
                lambda scenario: bucket.read_bytes(key) if (key := ginkgo_report_keys[scenario]) else None,
                report,
            )
            report.seek(0)
            bucket.upload(key=keys.ginkgo_report, fileobj=report)
        bucket.write_text(key=keys.metrics, text=metrics_text)
        bucket.write_text(key=keys.verdicts, text=json.dumps(verdicts, indent=2))
        bucket.write_text(key=keys.results, text=json.dumps(results, indent=2))
        # Last: the entry points at objects that are already there.
        attempts = append_to_manifest(bucket, key=manifest_key(prefix), entry=entry, sleep=sleep)
    except (BotoCoreError, ClientError) as error:
        raise PublishError(
            f"could not publish run {run_id} to s3://{bucket.bucket}/{prefix}: {error}. "
            f"Its manifest entry was not written (the manifest is written last and only whole); "
            "check the bucket, its endpoint and the credentials of the AWS connection, then clear this task"
        ) from error
    return PublishedRun(
        keys=keys,
        manifest_key=manifest_key(prefix),
        manifest_attempts=attempts,
        problems=problems,
    )


def append_to_manifest(
    bucket: ResultsBucketHook,
    *,
    key: str,
    entry: Mapping[str, Any],
    attempts: int = MANIFEST_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Upsert ``entry`` into the manifest at ``key``; return the number of attempts it took.

    A manifest that does not parse raises ManifestError and is left as it is.
    """
    for attempt in range(1, attempts + 1):
        current = bucket.read_versioned(key)
        manifest = parse_manifest(current.body, key=key) if current else empty_manifest()
        try:
            bucket.write_conditionally(
                key=key,
                text=manifest_text(upsert_run(manifest, entry)),
                etag=current.etag if current else None,
            )
        except ObjectChanged:
            # Full jitter: concurrent publishers spread out instead of colliding again.
            sleep(random.uniform(0, min(2.0, 0.05 * 2**attempt)))
            continue
        return attempt
    raise ManifestConflictError(
        f"{key}: other publishers changed it {attempts} times in a row; the entry of run "
        f"{entry.get('run_id')} was not added and nothing was overwritten: publish again"
    )
