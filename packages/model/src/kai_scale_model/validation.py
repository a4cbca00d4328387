"""How a data file's validation errors read: each field by its dotted path, then what is wrong."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError


class StrictModel(BaseModel):
    """The base of the files and documents the pipeline reads and writes: unknown fields refused, frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def problems(error: ValidationError) -> str:
    """Every error of ``error`` as ``'kwok.version' Field required``, joined by ``; ``."""
    return "; ".join(
        f"'{'.'.join(str(part) for part in e['loc']) or '(top level)'}' {e['msg']}" for e in error.errors()
    )
