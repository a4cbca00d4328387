from __future__ import annotations

import io
import json

from kai_scale.publishing.reports import merge_reports


def _report(suite: str, specs: int) -> bytes:
    return json.dumps([{"SuitePath": suite, "SpecReports": [{"n": i} for i in range(specs)]}]).encode()


def test_reports_are_merged_into_one_array_in_order() -> None:
    reports = {"a": _report("a", 2), "b": None, "c": _report("c", 1)}
    out = io.BytesIO()
    problems = merge_reports(reports, reports.__getitem__, out)
    merged = json.loads(out.getvalue())
    assert problems == []
    assert [suite["SuitePath"] for suite in merged] == ["a", "c"]
    assert len(merged[0]["SpecReports"]) == 2


def test_a_truncated_report_is_left_out_and_named() -> None:
    reports = {"a": _report("a", 1)[:-5], "b": _report("b", 1), "c": b'{"not": "a list"}'}
    out = io.BytesIO()
    problems = merge_reports(reports, reports.__getitem__, out)
    assert [suite["SuitePath"] for suite in json.loads(out.getvalue())] == ["b"]
    assert len(problems) == 2
    assert problems[0].startswith("a: ")
    assert "truncated" in problems[0]
    assert problems[1].startswith("c: ")
    assert "not a JSON array" in problems[1]


def test_no_reports_is_an_empty_array() -> None:
    out = io.BytesIO()
    assert merge_reports([], lambda _: None, out) == []
    assert json.loads(out.getvalue()) == []
