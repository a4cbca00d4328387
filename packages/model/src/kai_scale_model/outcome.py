"""A scenario's outcome: the suite's result shape plus why it ended as it did. Pure: no I/O."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# not_run: selected, but the system under test (KAI) was missing or not ready, so nothing was measured.
# skipped: not selected for the run (only older runners wrote it for a missing KAI).
Status = Literal["success", "failure", "not_run", "skipped"]
STATUSES: tuple[str, ...] = ("success", "failure", "not_run", "skipped")
# scenario: it ran and what it measures failed (KAI's specs failed, the workload's pods were not all
# scheduled); infrastructure: the pipeline could not run it or record it (runner crashed, no suite).
FailureKind = Literal["scenario", "infrastructure"]
FAILURE_KINDS: tuple[str, ...] = ("scenario", "infrastructure")


class OutcomeError(ValueError):
    """An outcome.json that cannot be read back; the message says what is wrong with it."""


@dataclass(frozen=True, kw_only=True)
class TestResult:
    """One entry of the suite's ``kwok_scale_test.json``: exactly the suite's field names."""

    test_name: str
    """The suite's name for the measurement, e.g. "Fill Cluster with single GPU Jobs"."""
    status: str
    """``success`` or ``failure`` as the suite writes it."""
    details: dict[str, Any] | None
    """The suite's measurements (``nodes``, ``jobs``, ``time``, ...), kept as written."""


@dataclass(frozen=True, kw_only=True)
class ScenarioOutcome:
    """What one runner pod reports for its scenario (``outcome.json``)."""

    scenario: str
    """Scenario name."""
    kind: str
    """``ginkgo`` or ``workload``."""
    status: Status
    """``success``, ``failure`` or ``not_run`` (``skipped`` from older runners)."""
    reason: str | None
    """Why it failed or did not run, in words a KAI engineer can act on; None on success."""
    started_at: str
    """RFC 3339 UTC time the runner started the scenario."""
    finished_at: str
    """RFC 3339 UTC time the runner finished it."""
    exit_code: int | None = None
    """Exit code of the suite binary (ginkgo scenarios), if it ran."""
    tests: tuple[TestResult, ...] = field(default=())
    """The measurements, in the suite's shape."""
    kai_commit_hash: str | None = None
    """The KAI commit the runner image's suite was built from, when the image records it."""
    failure_kind: FailureKind | None = None
    """For a failure: ``scenario`` or ``infrastructure`` (see ``FailureKind``); None otherwise."""

    def to_json(self) -> str:
        """Serialise as ``outcome.json``."""
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> ScenarioOutcome:
        """Read ``outcome.json``; a truncated or foreign document raises OutcomeError."""
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise OutcomeError(f"outcome.json is not valid JSON (truncated?): {error}") from error
        if not isinstance(document, dict):
            raise OutcomeError("outcome.json must be a JSON object")
        try:
            tests = tuple(TestResult(**test) for test in document.pop("tests", []))
            outcome = cls(**document, tests=tests)
        except TypeError as error:
            raise OutcomeError(f"outcome.json does not have the runner's fields: {error}") from error
        if outcome.status not in STATUSES:
            raise OutcomeError(f"outcome.json: status must be one of {STATUSES}, got {outcome.status!r}")
        if outcome.failure_kind not in (*FAILURE_KINDS, None):
            raise OutcomeError(
                f"outcome.json: failure_kind must be one of {FAILURE_KINDS} or null, "
                f"got {outcome.failure_kind!r}"
            )
        return outcome
