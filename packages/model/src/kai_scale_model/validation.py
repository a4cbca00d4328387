"""The bases of the pipeline's files and documents, and how their validation errors read.

An error names each field by its dotted path, then what is wrong.
"""

from __future__ import annotations

import json
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

Model = TypeVar("Model", bound=BaseModel)


class StrictModel(BaseModel):
    """The base of the files and documents the pipeline reads and writes: unknown fields refused, frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class JsonDocument(StrictModel):
    """A document the pipeline writes as JSON, where a value may be NaN or infinite (a suite's detail).

    Such a value stays as ``json.dumps`` writes it (``NaN``, ``Infinity``), not pydantic's default null.
    """

    model_config = ConfigDict(ser_json_inf_nan="constants")


def problems(error: ValidationError) -> str:
    """Every error of ``error`` as ``'kwok.version' Field required``, joined by ``; ``."""
    return "; ".join(
        f"'{'.'.join(str(part) for part in e['loc']) or '(top level)'}' {e['msg']}" for e in error.errors()
    )


def validated(model: type[Model], document: object, *, what: str, error: type[Exception]) -> Model:
    """``document`` (parsed) validated as ``model``; else ``error``: ``what``, then each bad field."""
    try:
        return model.model_validate(document)
    except ValidationError as invalid:
        raise error(f"{what}: {problems(invalid)}") from invalid


def validated_json(model: type[Model], text: str, *, what: str, error: type[Exception]) -> Model:
    """``text`` parsed as JSON and validated as ``model``; else ``error`` naming ``what``."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as not_json:
        raise error(f"{what} is not JSON (truncated?): {not_json}") from not_json
    return validated(model, document, what=what, error=error)
