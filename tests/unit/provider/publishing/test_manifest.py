from __future__ import annotations

import json

import pytest

from kai_scale.publishing.manifest import ManifestError, manifest_text, parse_manifest, upsert_run

KEY = "Public/manifest.json"


def _entry(run_id: str, status: str = "success") -> dict[str, object]:
    return {
        "timestamp": "2026-11-22T02:00:00Z",
        "path": f"Public/{run_id}/results.json",
        "commit": "abc",
        "run_id": run_id,
        "status": status,
    }


def test_a_new_run_is_appended_and_history_kept() -> None:
    legacy = {"timestamp": "2026-07-01T00:00:00Z", "path": "Public/old/results.json", "commit": "x"}
    manifest = {"runs": [legacy, _entry("a")], "note": "kept"}
    updated = upsert_run(manifest, _entry("b"))
    assert updated["runs"] == [legacy, _entry("a"), _entry("b")]
    assert updated["note"] == "kept"
    assert manifest["runs"] == [legacy, _entry("a")], "the input is not changed"


def test_the_same_run_is_updated_in_place() -> None:
    manifest = {"runs": [_entry("a", "failure"), _entry("b")]}
    updated = upsert_run(manifest, _entry("a", "success"))
    assert updated["runs"] == [_entry("a", "success"), _entry("b")]


def test_an_entry_without_run_id_is_matched_by_path() -> None:
    legacy = {"timestamp": "t", "path": "Public/a/results.json", "commit": "x"}
    assert upsert_run({"runs": [legacy]}, _entry("a"))["runs"] == [_entry("a")]


def test_duplicates_of_a_run_collapse_into_one() -> None:
    manifest = {"runs": [_entry("a"), _entry("b"), _entry("a")]}
    assert [r["run_id"] for r in upsert_run(manifest, _entry("a"))["runs"]] == ["a", "b"]


def test_round_trip() -> None:
    manifest = {"runs": [_entry("a")]}
    assert parse_manifest(manifest_text(manifest), key=KEY) == manifest


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"runs": [', "is not valid JSON"),
        ("[]", "is not a manifest"),
        ('{"runs": {}}', "is not a manifest"),
        ('{"runs": [1]}', "every entry of 'runs' must be an object"),
        ("", "is not valid JSON"),
        (b'{"runs": [{"path": "\xff"}]}', "is not UTF-8 text"),
    ],
)
def test_a_corrupt_manifest_is_refused_by_name(text: str | bytes, message: str) -> None:
    with pytest.raises(ManifestError, match=message) as raised:
        parse_manifest(text, key=KEY)
    assert KEY in str(raised.value)
    assert "refusing to overwrite" in str(raised.value)


def test_manifest_text_is_compact_json() -> None:
    text = manifest_text({"runs": [_entry("a")]})
    assert "\n" not in text
    assert json.loads(text) == {"runs": [_entry("a")]}
