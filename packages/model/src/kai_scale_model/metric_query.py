"""A named PromQL expression: a metrics profile's entry, or one a scenario file adds. Pure."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from kai_scale_model.validation import StrictModel

QUERY_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,62}$"


class MetricQuery(StrictModel):
    """One named PromQL expression, evaluated over a scenario's window."""

    name: Annotated[str, Field(pattern=QUERY_NAME_PATTERN)]
    query: Annotated[str, Field(min_length=1)]
    unit: str = Field(description="unit of the values, e.g. ms, seconds, bytes, cores, 1/s")
    description: str = ""
