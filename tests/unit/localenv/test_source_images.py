"""localenv/source_images.py: reading what images.sh pushed, and its record in the state directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from localenv.processes import ComponentError
from localenv.source_images import BuiltImages, SourceImages

PUSHED = """\
runner=127.0.0.1:25000/ghcr.io/kai-scale-pipeline/runner:main@sha256:abc
kai_commit=d5bc503a146317e51037d89775d77172c6d12f71
kai_source=/cache/kai-source/d5bc503a1463
kai_image_repository=ghcr.io/kai-scheduler/kai-scheduler
kai_image_tag=d5bc503a1463
airflow_image=ghcr.io/kai-scale-pipeline/airflow:0123456789ab
"""


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
