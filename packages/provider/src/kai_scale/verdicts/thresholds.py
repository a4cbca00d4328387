"""A run's ``thresholds:`` evaluated: each bound on one detail of one test entry. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from kai_scale.verdicts.values import bound_number, detail_number
from kai_scale_model.validation import JsonDocument

ThresholdStatus = Literal["pass", "breach", "missing"]


class ThresholdFinding(JsonDocument):
    """One threshold checked against the run; as verdicts.json's ``threshold`` of a detail has it."""

    test_name: str
    """The test entry the threshold names."""
    detail: str
    """The detail it bounds."""
    min: float | None
    """Lower bound (seconds for durations), if any."""
    max: float | None
    """Upper bound (seconds for durations), if any."""
    value: float | None
    """The run's value (seconds for durations); None when the run did not produce it."""
    status: ThresholdStatus
    """``pass``, ``breach``, or ``missing`` (the run has no such test or detail)."""
    reason: str
    """One line a person can act on."""


def evaluate_thresholds(
    *, thresholds: Sequence[Mapping[str, Any]], tests: Sequence[Mapping[str, Any]], where: str
) -> list[ThresholdFinding]:
    """Each threshold (``test_name``, ``detail``, ``min``/``max``) against the run's test entries.

    :param where: where the thresholds come from (a scenario file), named in errors.
    """
    findings = []
    for index, threshold in enumerate(thresholds):
        place = f"{where}: thresholds[{index}]"
        test_name, detail = str(threshold["test_name"]), str(threshold["detail"])
        low = (
            bound_number(threshold["min"], where=f"{place}.min") if threshold.get("min") is not None else None
        )
        high = (
            bound_number(threshold["max"], where=f"{place}.max") if threshold.get("max") is not None else None
        )
        entry = next((t for t in tests if t.get("test_name") == test_name), None)
        raw = (entry.get("details") or {}).get(detail) if entry else None
        value = detail_number(raw) if raw is not None else None
        if entry is None or value is None:
            missing = "test" if entry is None else "detail"
            reason = f"threshold on {test_name!r} / {detail!r}: the run produced no such {missing}"
            status: ThresholdStatus = "missing"
        elif (low is not None and value < low) or (high is not None and value > high):
            bound = f"min {low:g}" if low is not None and value < low else f"max {high:g}"
            reason = f"{test_name!r} / {detail!r} = {raw} ({value:g}) breaches {bound}"
            status = "breach"
        else:
            reason, status = f"{test_name!r} / {detail!r} = {raw} within bounds", "pass"
        findings.append(
            ThresholdFinding(
                test_name=test_name,
                detail=detail,
                min=low,
                max=high,
                value=value,
                status=status,
                reason=reason,
            )
        )
    return findings
