"""Profiles in the ``collect_metrics`` task: each selected scenario's, over the window of its metrics."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from kai_scale.hooks.pyroscope import PyroscopeHook
from kai_scale.hooks.results_bucket import BINARY_CONTENT_TYPE, ResultsBucketHook
from kai_scale.metrics.collection import Window
from kai_scale.object_keys import run_file_key, run_profiles_key
from kai_scale.profiles.collection import (
    ProfileType,
    RunProfiles,
    collect_scenario,
    queryable_at,
)
from kai_scale.profiles.pyroscope_api import PyroscopeClient, PyroscopeError
from kai_scale_model import kai

log = logging.getLogger(__name__)


class ProfileFetcher:
    """Fetches merged profiles through one client, connected at the first fetch.

    Once Pyroscope is found unreachable (or its connection undefined), every later fetch fails with
    the same error at once: a night's profiles do not each wait out the connection retries.
    """

    def __init__(self, connect: Callable[[], PyroscopeClient]) -> None:
        self._connect = connect
        # None until the first use; then the client, or the error that stops every later fetch.
        self._state: PyroscopeClient | PyroscopeError | None = None

    def _client(self) -> PyroscopeClient | PyroscopeError:
        if self._state is None:
            try:
                self._state = self._connect()
            except PyroscopeError as error:
                self._state = error
        return self._state

    def connected(self) -> bool:
        """Whether a client was built (its connection is defined and readable); builds it at first."""
        return isinstance(self._client(), PyroscopeClient)

    def __call__(self, profile_type: ProfileType, window: Window) -> bytes:
        """KAI's scheduler's merged profile of ``profile_type`` over ``window``, as Pyroscope sent it."""
        client = self._client()
        if isinstance(client, PyroscopeError):
            raise client
        try:
            return client.merged_profile(
                profile_type=profile_type.pyroscope_id,
                service=kai.SCHEDULER_NAME,
                start=window.start,
                end=window.end,
            )
        except PyroscopeError as error:
            if error.unreachable:
                client.close()
                self._state = error
            raise

    def close(self) -> None:
        """Close the client's connections, if it connected."""
        if isinstance(self._state, PyroscopeClient):
            self._state.close()


def collect_profiles(
    *,
    pyroscope_conn_id: str,
    bucket: ResultsBucketHook,
    run_id: str,
    windows: Mapping[str, Window | None],
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
) -> RunProfiles:
    """Write ``runs/<run-id>/profiles.json`` and the pprof files it names; return the document.

    The task cleared an earlier try's document before it collected anything (``collect_metrics``).

    Waits until Pyroscope can answer for the last window (``QUERYABLE_AFTER``), unless its connection
    is undefined or unreadable. Pyroscope's problems mark profiles missing; only the bucket's fail the
    task.
    """
    key = run_profiles_key(run_id)
    pyroscope = ProfileFetcher(PyroscopeHook(pyroscope_conn_id=pyroscope_conn_id).get_conn)
    try:
        ready = queryable_at(windows)
        if ready is not None and pyroscope.connected() and (wait := (ready - now()).total_seconds()) > 0:
            log.info("profiles: waiting %.0f s for Pyroscope to make the last window queryable", wait)
            sleep(wait)
        collected = {
            name: collect_scenario(pyroscope, scenario=name, service=kai.SCHEDULER_NAME, window=window)
            for name, window in windows.items()
        }
    finally:
        pyroscope.close()
    document = RunProfiles(run_id=run_id, scenarios={name: c.entry for name, c in collected.items()})
    with bucket.errors_named(f"write the profiles of run {run_id}"):
        for scenario in collected.values():
            for file, data in scenario.files.items():
                bucket.write_bytes(
                    key=run_file_key(run_id, file), data=data, content_type=BINARY_CONTENT_TYPE
                )
        bucket.write_text(key=key, text=json.dumps(document.model_dump(mode="json")))
    for name, entry in document.scenarios.items():
        log.info("%s: profiles %s%s", name, entry.status, f" ({entry.reason})" if entry.reason else "")
        for profile, found in entry.profiles.items():
            if found.status == "missing":
                log.info("  %s: %s", profile, found.reason)
    return document
