"""The scenario file's schema; pydantic validates it and names the field that is wrong."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Literal

from pydantic import Field, field_serializer, field_validator, model_validator

from kai_scale_model import kai
from kai_scale_model.durations import format_duration, parse_duration
from kai_scale_model.metric_query import MetricQuery
from kai_scale_model.runner_interface import PIPELINE_ENV
from kai_scale_model.validation import StrictModel

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$"


class GinkgoRun(StrictModel):
    """Run the compiled KAI scale suite, selecting specs by focus and/or label filter."""

    kind: Literal["ginkgo"]
    focus: str = Field(description="Ginkgo --focus regular expression over the full spec text")
    label_filter: str | None = Field(default=None, description="Ginkgo --label-filter expression")

    @field_validator("focus")
    @classmethod
    def _focus_is_a_regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as error:
            raise ValueError(f"must be a regular expression: {error}") from error
        return value


class WorkloadRun(StrictModel):
    """Create GPU pods on the KWOK nodes and measure how fast the scheduler binds them."""

    kind: Literal["workload"]
    pods_per_node: int = Field(
        gt=0, le=110, description="pods to create per KWOK node (scales with NODE_COUNT)"
    )
    gpus_per_pod: int = Field(default=1, ge=1, le=8, description="nvidia.com/gpu limit of each pod")
    scheduler_name: str = Field(default="default-scheduler", description="spec.schedulerName of the pods")
    create_concurrency: int = Field(default=32, ge=1, le=256, description="parallel create requests")
    node_selector: dict[str, str] = Field(default_factory=lambda: {"type": "kwok"})
    pod_labels: dict[str, str] = Field(
        default_factory=dict,
        description="extra pod labels, e.g. the KAI queue label when scheduler_name is KAI's",
    )


class Resources(StrictModel):
    """Requests and limits of the runner container."""

    requests: dict[str, str] = Field(default_factory=lambda: {"cpu": "500m", "memory": "512Mi"})
    limits: dict[str, str] = Field(default_factory=lambda: {"memory": "2Gi"})


def _seconds(bound: float | str) -> float:
    return parse_duration(bound).total_seconds() if isinstance(bound, str) else float(bound)


class Threshold(StrictModel):
    """A bound on one numeric or duration detail of one test entry (checked when the run is published)."""

    test_name: str
    detail: str
    max: float | str | None = Field(default=None, description="a number, or a duration like 6m30s")
    min: float | str | None = Field(default=None, description="a number, or a duration like 6m30s")

    @field_validator("max", "min")
    @classmethod
    def _bound_is_a_number_or_a_duration(cls, value: float | str | None) -> float | str | None:
        if isinstance(value, str):
            parse_duration(value)  # raises the message a user sees for every duration
        return value

    @model_validator(mode="after")
    def _bounds_make_a_range(self) -> Threshold:
        if self.min is None and self.max is None:
            raise ValueError("a threshold needs min, max or both")
        if self.min is not None and self.max is not None and _seconds(self.min) > _seconds(self.max):
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        return self


class DetailRule(StrictModel):
    """How regressions of one detail of one test entry are judged, where the default does not fit."""

    test_name: str
    detail: str
    better: Literal["lower", "higher"] | None = Field(
        default=None, description="which way is better; by default from the detail's name (rates higher)"
    )
    min_change: Annotated[float, Field(ge=0)] = Field(
        default=0.05, description="relative change (0.05 = 5 %) below which nothing is flagged"
    )
    judge: bool = Field(
        default=True, description="false for a setting or a size (pods, gpus per pod), not a measurement"
    )


class Scenario(StrictModel):
    """One scenario: what a runner pod runs, for how long at most, with which env and resources."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    description: str
    enabled: bool = True
    run: GinkgoRun | WorkloadRun = Field(discriminator="kind")
    timeout: timedelta
    env: dict[str, str] = Field(default_factory=dict)
    resources: Resources = Field(default_factory=Resources)
    thresholds: tuple[Threshold, ...] = ()
    detail_rules: tuple[DetailRule, ...] = ()
    metrics: tuple[MetricQuery, ...] = Field(
        default=(), description="named PromQL queries collected for this scenario besides the profile's"
    )

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout_is_a_duration(cls, value: object) -> timedelta:
        if isinstance(value, timedelta):  # built in code rather than read from a file
            return value
        if not isinstance(value, str):
            raise ValueError(f"must be a duration like 90m, got {value!r}")
        parsed = parse_duration(value)
        if parsed <= timedelta(0):
            raise ValueError(f"must be positive, got {value!r}")
        return parsed

    @field_serializer("timeout")
    def _timeout_as_written(self, value: timedelta) -> str:
        # Round-trips through the runner pod's environment, which validates it with this same model.
        return format_duration(value)

    @field_validator("env")
    @classmethod
    def _env_does_not_override_the_pipeline(cls, value: dict[str, str]) -> dict[str, str]:
        reserved = sorted(set(value) & set(PIPELINE_ENV))
        if reserved:
            raise ValueError(f"{', '.join(reserved)} are set by the pipeline and cannot be overridden")
        return value

    @property
    def kind(self) -> str:
        """``ginkgo`` or ``workload``."""
        return self.run.kind

    @property
    def needs_kai(self) -> bool:
        """Whether it measures KAI, so cannot run without it: its suite, or a workload for its scheduler."""
        return isinstance(self.run, GinkgoRun) or self.run.scheduler_name == kai.SCHEDULER_NAME
