"""localenv/source_images.py: reading what images.sh pushed, and its record in the state directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from localenv.processes import ComponentError
from localenv.source_images import BuiltImages, SourceImages
from tests.unit.localenv.images_record import PUSHED


def test_images_sh_output_is_read() -> None:
    images = BuiltImages.parse(PUSHED)
    assert images.kai_source == Path("/cache/kai-source/d5bc503a1463")
    assert images.kai_image_tag == "d5bc503a1463"
    assert images.runner.endswith("@sha256:abc")
    assert images.airflow_image == "ghcr.io/kai-scale-pipeline/airflow:0123456789ab"


def test_a_missing_key_is_named() -> None:
    output = "\n".join(line for line in PUSHED.splitlines() if not line.startswith("kai_image_tag="))
    with pytest.raises(ComponentError, match="did not report kai_image_tag"):
        BuiltImages.parse(output)


def test_the_record_of_the_last_push_is_read_back(tmp_path: Path) -> None:
    images = SourceImages(record=tmp_path / "images.env", logs_dir=tmp_path)
    (tmp_path / "images.env").write_text(PUSHED)
    assert images.built() == BuiltImages.parse(PUSHED)


def test_no_record_says_to_start_the_environment(tmp_path: Path) -> None:
    images = SourceImages(record=tmp_path / "images.env", logs_dir=tmp_path)
    said = r"no images built for this environment \(.*images.env\): run `make local-up`"
    with pytest.raises(ComponentError, match=said):
        images.built()


def _script(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "images.sh"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


def test_a_push_is_recorded_as_images_sh_reported_it(tmp_path: Path) -> None:
    """A stand-in for images.sh (the real one builds every image: the integration tests run it)."""
    (tmp_path / "pushed.txt").write_text(PUSHED)
    script = _script(tmp_path, f'echo "building" >&2; cat {tmp_path / "pushed.txt"}')
    images = SourceImages(record=tmp_path / "images.env", logs_dir=tmp_path, script=script)
    assert images.build_and_push("127.0.0.1:25000") == BuiltImages.parse(PUSHED)
    assert images.built() == BuiltImages.parse(PUSHED)
    assert (tmp_path / "images.log").read_text() == f"building\n{PUSHED}"


def test_a_failed_build_names_images_sh_last_word_and_keeps_the_last_record(
    tmp_path: Path,
) -> None:
    """A stand-in for images.sh, as above."""
    (tmp_path / "images.env").write_text(PUSHED)
    said = "echo 'localenv images: the runner image failed to build; see /tmp/runner.log' >&2; exit 1"
    images = SourceImages(record=tmp_path / "images.env", logs_dir=tmp_path, script=_script(tmp_path, said))
    with pytest.raises(ComponentError) as failed:
        images.build_and_push("127.0.0.1:25000")
    assert str(failed.value) == (
        "images: building or pushing the images from source failed: the runner image failed to build; "
        f"see /tmp/runner.log ({tmp_path / 'images.log'})"
    )
    assert images.built() == BuiltImages.parse(PUSHED)


def test_a_report_without_every_key_is_refused_and_not_recorded(tmp_path: Path) -> None:
    """A stand-in for images.sh, as above."""
    images = SourceImages(
        record=tmp_path / "images.env", logs_dir=tmp_path, script=_script(tmp_path, "echo runner=r")
    )
    with pytest.raises(ComponentError, match="did not report kai_commit, kai_source"):
        images.build_and_push("127.0.0.1:25000")
    assert not (tmp_path / "images.env").exists()
