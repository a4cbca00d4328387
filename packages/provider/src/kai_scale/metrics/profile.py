"""Named PromQL queries: the profile file under ``include/metrics/`` and a scenario's own additions."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, field_validator

from kai_scale_model.durations import parse_duration
from kai_scale_model.metric_query import MetricQuery
from kai_scale_model.validation import StrictModel


class MetricsProfileError(ValueError):
    """A profile or scenario query set that cannot be used; the message names the file and the field."""


class MetricsProfile(StrictModel):
    """The queries run for every scenario, and the resolution of the range queries."""

    step: timedelta = Field(description="range query resolution, e.g. 15s")
    queries: tuple[MetricQuery, ...] = Field(min_length=1)

    @field_validator("step", mode="before")
    @classmethod
    def _step_is_a_duration(cls, value: object) -> timedelta:
        if isinstance(value, timedelta):
            return value
        if not isinstance(value, str):
            raise ValueError(f"must be a duration like 15s, got {value!r}")
        parsed = parse_duration(value)
        if parsed < timedelta(seconds=1):
            raise ValueError(f"must be at least 1s, got {value!r}")
        return parsed

    @field_validator("queries")
    @classmethod
    def _names_are_unique(cls, value: tuple[MetricQuery, ...]) -> tuple[MetricQuery, ...]:
        _check_unique(value)
        return value

    def with_additions(self, additions: tuple[MetricQuery, ...], *, owner: str) -> tuple[MetricQuery, ...]:
        """The profile's queries followed by ``owner``'s (a scenario's); a name used twice is an error."""
        try:
            return _check_unique((*self.queries, *additions))
        except ValueError as error:
            raise MetricsProfileError(f"{owner}: metrics: {error}") from error


def _check_unique(queries: tuple[MetricQuery, ...]) -> tuple[MetricQuery, ...]:
    names = [q.name for q in queries]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"query names must be unique, repeated: {', '.join(repeated)}")
    return queries


def load_profile(path: Path) -> MetricsProfile:
    """Read and validate a profile file."""
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise MetricsProfileError(f"metrics profile {path}: cannot be read: {error}") from error
    try:
        return MetricsProfile.model_validate(document)
    except ValidationError as error:
        problems = "; ".join(
            f"'{'.'.join(str(p) for p in e['loc']) or '(top level)'}' {e['msg']}" for e in error.errors()
        )
        raise MetricsProfileError(f"metrics profile {path}: {problems}") from error
