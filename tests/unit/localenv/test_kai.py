"""localenv/kai.py: reading what images.sh pushed, and the chart values made of it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from localenv.kai import BuiltImages, chart_values, reports_available
from localenv.processes import ComponentError

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


def test_chart_values_point_kai_at_its_built_images_and_the_system_node() -> None:
    taint = {"key": "role", "value": "system", "effect": "NoSchedule"}
    values = yaml.safe_load(
        chart_values(BuiltImages.parse(PUSHED), node_selector={"role": "system"}, tolerations=[taint])
    )
    assert values == {
        "global": {
            "registry": "ghcr.io/kai-scheduler/kai-scheduler",
            "tag": "d5bc503a1463",
            "nodeSelector": {"role": "system"},
            "tolerations": [taint],
        }
    }


def _config(generation: int, *conditions: tuple[str, str, int]) -> dict[str, object]:
    return {
        "metadata": {"name": "kai-config", "generation": generation},
        "status": {
            "conditions": [
                {"type": kind, "status": status, "observedGeneration": observed}
                for kind, status, observed in conditions
            ]
        },
    }


def test_kai_is_available_only_as_the_operator_reports_it_for_the_current_config() -> None:
    assert reports_available(_config(1, ("Deployed", "True", 1), ("Available", "True", 1)))
    assert not reports_available(_config(1, ("Available", "False", 1)))
    assert not reports_available(_config(2, ("Available", "True", 1))), "said of the previous config"
    assert not reports_available(_config(1, ("Deployed", "True", 1)))
    assert not reports_available({}), "no Config yet"
