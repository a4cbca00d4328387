from __future__ import annotations

from pathlib import Path

import pytest

from kai_scale_runner import cli


def test_the_commit_comes_from_the_environment_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    recorded = tmp_path / "kai-commit"
    recorded.write_text("from-image\n")
    monkeypatch.setattr(cli, "KAI_COMMIT_FILE", recorded)
    monkeypatch.setenv("KAI_COMMIT_HASH", "from-env")
    assert cli.kai_commit_hash() == "from-env"
    monkeypatch.delenv("KAI_COMMIT_HASH")
    assert cli.kai_commit_hash() == "from-image", "the image's record, stripped"
    recorded.write_text("")
    assert cli.kai_commit_hash() is None
    monkeypatch.setattr(cli, "KAI_COMMIT_FILE", tmp_path / "absent")
    assert cli.kai_commit_hash() is None, "an image built without the record"
