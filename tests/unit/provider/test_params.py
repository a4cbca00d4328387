from __future__ import annotations

from typing import Any

import pytest

from kai_scale.params import DEFAULT_NODE_COUNT, ParamError, check_params, param_schema

NAMES = ["reclaim", "gpu-pod-throughput"]
GOOD: dict[str, Any] = {
    "node_count": 100,
    "scenarios": ["reclaim"],
    "kai_ref": "v0.9.0",
    "runner_image": "ghcr.io/kai-scale-pipeline/runner",
    "runner_tag": "v0.9.0",
}


def test_defaults_select_the_enabled_scenarios() -> None:
    schema = param_schema(scenario_names=NAMES, enabled=["reclaim"])
    assert schema["node_count"]["default"] == DEFAULT_NODE_COUNT
    assert (schema["node_count"]["minimum"], schema["node_count"]["maximum"]) == (1, 10_000)
    assert schema["scenarios"]["default"] == ["reclaim"]
    assert schema["scenarios"]["items"]["enum"] == NAMES


def test_good_values() -> None:
    params = check_params(GOOD, scenario_names=NAMES)
    assert params.image == "ghcr.io/kai-scale-pipeline/runner:v0.9.0"
    assert params.scenarios == ("reclaim",)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"node_count": 0}, r"'node_count' must be an integer from 1 to 10000, got 0"),
        ({"node_count": 10_001}, r"'node_count' must be an integer"),
        ({"node_count": "500"}, r"'node_count' must be an integer"),
        ({"node_count": True}, r"'node_count' must be an integer"),
        ({"scenarios": []}, r"'scenarios' must be a non-empty list"),
        (
            {"scenarios": ["reclaim", "nope"]},
            r"'scenarios' names unknown scenarios \['nope'\]; known: gpu-pod",
        ),
        ({"kai_ref": " "}, r"'kai_ref' must be a non-empty string"),
        ({"runner_tag": "has space"}, r"'runner_tag' is not a valid image tag"),
        (
            {"runner_image": "ghcr.io/org/runner:v1"},
            r"'runner_image' is not an image repository.*'runner_tag'",
        ),
        ({"runner_image": "GHCR.io/Org/Runner"}, r"'runner_image' is not an image repository"),
        ({"runner_image": "has space/runner"}, r"'runner_image' is not an image repository"),
    ],
)
def test_bad_values_name_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamError, match=message):
        check_params({**GOOD, **change}, scenario_names=NAMES)


@pytest.mark.parametrize(
    "image",
    ["ghcr.io/kai-scale-pipeline/runner", "localhost:5000/runner", "runner", "example.invalid/not-a-runner"],
)
def test_image_repositories_that_are_accepted(image: str) -> None:
    assert check_params({**GOOD, "runner_image": image}, scenario_names=NAMES).runner_image == image
