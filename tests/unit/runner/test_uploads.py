"""The runner's upload URLs variable: refused with a message that says what is wrong."""

from __future__ import annotations

import json

import pytest

from kai_scale_runner.uploads import parse_output_urls


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (None, "is not set"),
        ("{", "is not JSON"),
        ('["u"]', "must be a JSON object"),
        ('{"a": 1}', "JSON object"),
        (
            '{"result": "u", "report": "v"}',
            r"unknown: \['report', 'result'\]; 'outcome' required\): the runner image",
        ),
        ('{"ginkgo-report": "v"}', r"'outcome' required"),
    ],
)
def test_bad_output_urls(raw: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_output_urls(raw)


def test_the_pipelines_output_names_are_accepted() -> None:
    urls = {"outcome": "https://s3/o", "ginkgo-report": "https://s3/g"}
    assert parse_output_urls(json.dumps(urls)) == urls
