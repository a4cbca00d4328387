"""Reading a document: validated as its model, or the caller's error naming it and each bad field."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from kai_scale_model.validation import JsonDocument, validated, validated_json


class ReadingError(ValueError):
    pass


class Point(JsonDocument):
    x: float


def test_a_valid_document_is_the_model() -> None:
    assert validated(Point, {"x": 1}, what="point p.json", error=ReadingError) == Point(x=1)
    assert validated_json(Point, '{"x": 1}', what="point p.json", error=ReadingError) == Point(x=1)


def test_an_invalid_one_is_the_callers_error_naming_it_and_each_field() -> None:
    with pytest.raises(ReadingError, match=r"^point p.json: 'x' Field required; 'y' Extra inputs") as caught:
        validated_json(Point, '{"y": 1}', what="point p.json", error=ReadingError)
    assert isinstance(caught.value.__cause__, ValidationError)


def test_text_that_is_not_json_is_the_callers_error_too() -> None:
    with pytest.raises(ReadingError, match=r"^point p.json is not JSON \(truncated\?\): ") as caught:
        validated_json(Point, '{"x": ', what="point p.json", error=ReadingError)
    assert isinstance(caught.value.__cause__, json.JSONDecodeError)


def test_a_json_document_writes_non_finite_numbers_as_json_dumps_does() -> None:
    written = Point(x=math.inf).model_dump_json()
    assert written == json.dumps({"x": math.inf}, separators=(",", ":"))
