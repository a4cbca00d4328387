"""The runner's upload URLs variable: refused with a message that says what is wrong."""

from __future__ import annotations

import pytest

from kai_scale_runner.uploads import parse_output_urls


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (None, "is not set"),
        ("{", "is not JSON"),
        ('["u"]', "must be a JSON object"),
        ('{"a": 1}', "JSON object"),
    ],
)
def test_bad_output_urls(raw: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_output_urls(raw)
