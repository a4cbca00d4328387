from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from kai_scale.params import (
    DEFAULT_NODE_COUNT,
    ParamError,
    check_params,
    conf_schema,
    image_reference,
    param_schema,
)

NAMES = ["reclaim", "gpu-pod-throughput"]
DIGEST = "sha256:" + "ab" * 32
GOOD: dict[str, Any] = {
    "node_count": 100,
    "scenarios": ["reclaim"],
    "kai_ref": "v0.9.0",
    "runner_tag": "v0.9.0",
}


def test_defaults_select_the_enabled_scenarios() -> None:
    schema = param_schema(scenario_names=NAMES, enabled=["reclaim"])
    assert schema["node_count"]["default"] == DEFAULT_NODE_COUNT
    assert (schema["node_count"]["minimum"], schema["node_count"]["maximum"]) == (1, 10_000)
    assert schema["scenarios"]["default"] == ["reclaim"]
    assert schema["scenarios"]["items"]["enum"] == NAMES


def test_the_defaults_pass_the_check() -> None:
    """The form's defaults and the run check come from one schema, so the defaults are valid."""
    defaults = {
        name: spec["default"] for name, spec in param_schema(scenario_names=NAMES, enabled=NAMES).items()
    }
    assert check_params(defaults, scenario_names=NAMES).node_count == DEFAULT_NODE_COUNT


def test_the_conf_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(conf_schema(scenario_names=NAMES))


def test_good_values() -> None:
    params = check_params(GOOD, scenario_names=NAMES)
    assert params.scenarios == ("reclaim",)
    assert params.runner_tag == "v0.9.0"


@pytest.mark.parametrize(
    ("tag", "reference"),
    [("v0.9.0", "ghcr.io/org/runner:v0.9.0"), (DIGEST, f"ghcr.io/org/runner@{DIGEST}")],
)
def test_a_tag_or_a_digest_makes_the_image_reference(tag: str, reference: str) -> None:
    assert check_params({**GOOD, "runner_tag": tag}, scenario_names=NAMES).runner_tag == tag
    assert image_reference("ghcr.io/org/runner", tag) == reference


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"node_count": 0}, r"param 'node_count': 0 is less than the minimum of 1"),
        ({"node_count": 10_001}, r"param 'node_count': 10001 is greater than the maximum"),
        ({"node_count": "500"}, r"param 'node_count': '500' is not of type 'integer'"),
        ({"node_count": True}, r"param 'node_count': True is not of type 'integer'"),
        ({"scenarios": []}, r"param 'scenarios': \[\] should be non-empty"),
        (
            {"scenarios": ["reclaim", "nope"]},
            r"param 'scenarios/1': 'nope' is not one of \['reclaim', 'gpu-pod",
        ),
        ({"kai_ref": " "}, r"param 'kai_ref': ' ' does not match"),
        ({"runner_tag": "has space"}, r"param 'runner_tag': 'has space' does not match"),
        ({"runner_tag": "UPPER/case"}, r"param 'runner_tag': 'UPPER/case' does not match"),
        ({"runner_tag": "sha256:short"}, r"param 'runner_tag': 'sha256:short' does not match"),
        ({"node_cout": 50}, r"unknown param\(s\) 'node_cout'; the DAG's params are kai_ref, node_count"),
        ({"runner_image": "ghcr.io/org/runner"}, r"unknown param\(s\) 'runner_image'"),
    ],
)
def test_bad_values_name_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamError, match=message):
        check_params({**GOOD, **change}, scenario_names=NAMES)


def test_every_wrong_field_is_named_at_once() -> None:
    with pytest.raises(ParamError, match=r"'node_count'.*; .*'runner_tag'") as raised:
        check_params({**GOOD, "node_count": 0, "runner_tag": "a b"}, scenario_names=NAMES)
    assert str(raised.value).count("param '") == 2
