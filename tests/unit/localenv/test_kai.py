"""localenv/kai.py: the chart values made of what images.sh pushed, and KAI's availability."""

from __future__ import annotations

import yaml

from localenv.kai import chart_values, reports_available
from localenv.source_images import BuiltImages
from tests.unit.localenv.images_record import PUSHED


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
