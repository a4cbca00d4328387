"""Each scenario's profiles of KAI's scheduler over its own window, read from Pyroscope. Pure.

``RunProfiles`` is the run's profiles document (``runs/<run-id>/profiles.json``): per scenario, each
profile type's summary and the pprof file beside it (``profiles/<scenario>/<type>.pb.gz``, relative to
the run's folder), or why it is missing. ``collect_metrics`` writes it after the metrics;
``publish_results`` publishes the files beside ``results.json`` and the document inside it. A profile
that cannot be read is recorded as missing, never a failed run.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Final, Literal

from pydantic import Field

from kai_scale.metrics.collection import Window, WindowEntry
from kai_scale.profiles.pprof import GZIP_MAGIC, ProfileError, decode_profile
from kai_scale.profiles.pyroscope_api import PyroscopeError
from kai_scale.profiles.summary import ProfileSummary, summarize
from kai_scale_model import kai
from kai_scale_model.validation import StrictModel, validated_json


@dataclass(frozen=True)
class ProfileType:
    """A profile KAI's scheduler pushes: Pyroscope's ID of it, and the pprof sample type summarized."""

    pyroscope_id: str
    sample_type: str


# By file name: what pyroscope-go pushes as KAI's scheduler starts it (cmd/scheduler/profiling).
PROFILE_TYPES: Final = {
    "cpu": ProfileType("process_cpu:cpu:nanoseconds:cpu:nanoseconds", "cpu"),
    "alloc_space": ProfileType("memory:alloc_space:bytes:space:bytes", "alloc_space"),
    "inuse_space": ProfileType("memory:inuse_space:bytes:space:bytes", "inuse_space"),
}
# The profile the verdicts compare with the previous run's.
CPU_PROFILE: Final = "cpu"
# pyroscope-go pushes every 15 s and Pyroscope answers for the pushed profiles once it has flushed
# them: a window ending at T was answered whole from 25 s after T here (docs/benchmarks.md). A window
# is read only this long after it ended, so no answer is read before it is whole.
QUERYABLE_AFTER: Final = timedelta(seconds=45)
PPROF_SUFFIX: Final = ".pb.gz"


class ProfilesDocumentError(ValueError):
    """A profiles document that is not one (not JSON, malformed, truncated); names its source and field."""


class CollectedProfile(StrictModel):
    """A profile read for the window: its pprof file and its summary."""

    status: Literal["collected"]
    file: str
    """The gzipped pprof file, relative to the run's folder (``profiles/<scenario>/<type>.pb.gz``)."""
    summary: ProfileSummary


class MissingProfile(StrictModel):
    """A profile that could not be read for the window, and why."""

    status: Literal["missing"]
    reason: str


ProfileEntry = Annotated[CollectedProfile | MissingProfile, Field(discriminator="status")]


class ScenarioProfiles(StrictModel):
    """One scenario's profiles of KAI's scheduler over its window, by type (``PROFILE_TYPES``)."""

    status: Literal["collected", "partial", "missing"]
    reason: str | None
    service: str
    """The ``service_name`` the scheduler pushes under (its scheduler name)."""
    window: WindowEntry | None
    profiles: dict[str, ProfileEntry]


class RunProfiles(StrictModel):
    """``profiles.json``: per scenario, its profiles' summaries and files, or why they are missing."""

    run_id: str
    scenarios: dict[str, ScenarioProfiles]

    @classmethod
    def read(cls, text: str, *, source: str) -> RunProfiles:
        """``text`` parsed and validated; ProfilesDocumentError names ``source`` and each bad field."""
        return validated_json(cls, text, what=f"profiles {source}", error=ProfilesDocumentError)


@dataclass(frozen=True, kw_only=True)
class CollectedScenario:
    """A scenario's profiles entry, and the gzipped pprof files it names (by ``file``)."""

    entry: ScenarioProfiles
    files: dict[str, bytes]


def profile_file(scenario: str, profile: str) -> str:
    """Where a scenario's profile of one type sits, relative to the run's folder."""
    return f"profiles/{scenario}/{profile}{PPROF_SUFFIX}"


def queryable_at(windows: Mapping[str, Window | None]) -> datetime | None:
    """When the last of the windows can be read from Pyroscope (None: no window)."""
    ends = [window.end for window in windows.values() if window is not None]
    return max(ends) + QUERYABLE_AFTER if ends else None


def collect_scenario(
    fetch: Callable[[ProfileType, Window], bytes], *, scenario: str, service: str, window: Window | None
) -> CollectedScenario:
    """Every profile of ``PROFILE_TYPES`` over ``window``, each fetched with ``fetch``.

    A failure of Pyroscope, an answer that is no profile and a window without samples each mark that
    profile missing, saying why.
    """
    if window is None:
        return missing_scenario(
            scenario=scenario, service=service, reason="the scenario has no window (it did not run)"
        )
    profiles: dict[str, CollectedProfile | MissingProfile] = {}
    files: dict[str, bytes] = {}
    for name, profile_type in PROFILE_TYPES.items():
        no_samples = f"no samples of {service} in the window (does its scheduler push to this Pyroscope?)"
        try:
            data = fetch(profile_type, window)
            # No data at all is an empty answer, or one without a sample type.
            profile = decode_profile(data) if data else None
            if profile is None or not profile.samples:
                profiles[name] = MissingProfile(status="missing", reason=no_samples)
                continue
            summary = summarize(profile, profile_type.sample_type)
        except PyroscopeError as error:
            profiles[name] = MissingProfile(status="missing", reason=str(error))
            continue
        except ProfileError as error:
            profiles[name] = MissingProfile(
                status="missing", reason=f"Pyroscope's answer is no profile: {error}"
            )
            continue
        if summary.total == 0:
            profiles[name] = MissingProfile(status="missing", reason=no_samples)
            continue
        file = profile_file(scenario, name)
        files[file] = data if data.startswith(GZIP_MAGIC) else gzip.compress(data, mtime=0)
        profiles[name] = CollectedProfile(status="collected", file=file, summary=summary)
    status, reason = _scenario_state(profiles)
    entry = ScenarioProfiles(
        status=status, reason=reason, service=service, window=window.to_entry(), profiles=profiles
    )
    return CollectedScenario(entry=entry, files=files)


def _scenario_state(
    profiles: Mapping[str, CollectedProfile | MissingProfile],
) -> tuple[Literal["collected", "partial", "missing"], str | None]:
    """A scenario's status and reason from its profiles: which of them are missing."""
    missing = [name for name, entry in profiles.items() if entry.status == "missing"]
    status: Literal["collected", "partial", "missing"] = (
        "collected" if not missing else "missing" if len(missing) == len(profiles) else "partial"
    )
    return status, f"not collected: {', '.join(missing)}" if missing else None


def missing_scenario(
    *, scenario: str, service: str, reason: str, window: Window | None = None
) -> CollectedScenario:
    """A scenario none of whose profiles were read, each marked missing with ``reason``."""
    entry = ScenarioProfiles(
        status="missing",
        reason=f"not collected: {reason}",
        service=service,
        window=window.to_entry() if window else None,
        profiles={name: MissingProfile(status="missing", reason=reason) for name in PROFILE_TYPES},
    )
    return CollectedScenario(entry=entry, files={})


UNWRITTEN_REASON: Final = "the collect_metrics task wrote no profiles (see its log)"


def unwritten_profiles(
    *, run_id: str, scenarios: list[str], service: str, reason: str = UNWRITTEN_REASON
) -> RunProfiles:
    """The profiles document when none was written (the task crashed, or never ran), or none readable."""
    return RunProfiles(
        run_id=run_id,
        scenarios={
            name: missing_scenario(scenario=name, service=service, reason=reason).entry for name in scenarios
        },
    )


def profiles_to_publish(text: str | None, *, run_id: str, scenarios: list[str], source: str) -> RunProfiles:
    """The run's profiles document as publishing takes it.

    None (the metrics task wrote none) and a document that is not one are published as profiles
    missing, saying why; neither fails the run.
    """
    if text is None:
        return unwritten_profiles(run_id=run_id, scenarios=scenarios, service=kai.SCHEDULER_NAME)
    try:
        return RunProfiles.read(text, source=source)
    except ProfilesDocumentError as error:
        return unwritten_profiles(
            run_id=run_id, scenarios=scenarios, service=kai.SCHEDULER_NAME, reason=f"unreadable: {error}"
        )


def without_gone_files(document: RunProfiles, gone: Collection[str]) -> RunProfiles:
    """The document with each collected profile whose file is in ``gone`` marked missing, saying so.

    A file written by collect_metrics can be gone by the time the run is published (a lifecycle rule,
    a person); the run's documents then list no profile that cannot be downloaded.
    """
    if not gone:
        return document
    scenarios = {}
    for name, scenario in document.scenarios.items():
        profiles: dict[str, CollectedProfile | MissingProfile] = {
            kind: MissingProfile(
                status="missing", reason=f"its file {entry.file} was gone from the bucket at publishing"
            )
            if entry.status == "collected" and entry.file in gone
            else entry
            for kind, entry in scenario.profiles.items()
        }
        status, reason = _scenario_state(profiles)
        changed = profiles != scenario.profiles
        scenarios[name] = (
            scenario.model_copy(update={"profiles": profiles, "status": status, "reason": reason})
            if changed
            else scenario
        )
    return document.model_copy(update={"scenarios": scenarios})


def profile_files(document: RunProfiles) -> list[str]:
    """The pprof files the document names, relative to the run's folder."""
    return [
        entry.file
        for scenario in document.scenarios.values()
        for entry in scenario.profiles.values()
        if entry.status == "collected"
    ]
