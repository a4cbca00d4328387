"""The DAG's parameters: a JSON-schema form when triggering; values checked again before use. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_NODE_COUNT = 500
MAX_NODE_COUNT = 10_000
DEFAULT_RUNNER_IMAGE = "ghcr.io/kai-scale-pipeline/runner"
DEFAULT_KAI_REF = "main"
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
# An image repository as the distribution reference grammar has it: an optional registry host (and
# port), then lowercase path components. The tag is its own parameter.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_IMAGE = re.compile(
    rf"^(?:{_HOST_LABEL}(?:\.{_HOST_LABEL})*(?::[0-9]+)?/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*$"
)


class ParamError(ValueError):
    """A parameter value the pipeline cannot use; the message names the field."""


@dataclass(frozen=True, kw_only=True)
class RunParams:
    """The checked parameters of one run."""

    node_count: int
    """KWOK nodes in the NodePool, and the suite's NODE_COUNT."""
    scenarios: tuple[str, ...]
    """Names of the scenarios to run."""
    kai_ref: str
    """KAI git ref the runner image was built from (recorded with the results)."""
    runner_image: str
    """Runner image repository."""
    runner_tag: str
    """Runner image tag."""

    @property
    def image(self) -> str:
        """The runner pods' image reference."""
        return f"{self.runner_image}:{self.runner_tag}"


def param_schema(*, scenario_names: Sequence[str], enabled: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Arguments for ``airflow.sdk.Param`` per parameter (default, type, bounds, help)."""
    return {
        "node_count": {
            "default": DEFAULT_NODE_COUNT,
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_NODE_COUNT,
            "title": "Node count",
            "description": "KWOK nodes to simulate (NodePool size and the suite's NODE_COUNT).",
        },
        "scenarios": {
            "default": list(enabled),
            "type": "array",
            "items": {"type": "string", "enum": list(scenario_names)},
            "minItems": 1,
            "uniqueItems": True,
            "title": "Scenarios",
            "description": "Scenarios to run (files in include/scenarios/); the others are skipped.",
        },
        "kai_ref": {
            "default": DEFAULT_KAI_REF,
            "type": "string",
            "minLength": 1,
            "title": "KAI ref",
            "description": "KAI scheduler git ref the runner image's suite was built from.",
        },
        "runner_image": {
            "default": DEFAULT_RUNNER_IMAGE,
            "type": "string",
            "pattern": _IMAGE.pattern,
            "title": "Runner image",
            "description": "Repository of the runner image (runner/Dockerfile).",
        },
        "runner_tag": {
            "default": DEFAULT_KAI_REF,
            "type": "string",
            "pattern": _TAG.pattern,
            "title": "Runner image tag",
            "description": "Tag of the runner image; by convention the KAI ref it was built from.",
        },
    }


def check_params(values: Mapping[str, Any], *, scenario_names: Sequence[str]) -> RunParams:
    """Check the values a run got (the form checks them too, but a REST trigger may skip the form)."""
    node_count = values.get("node_count")
    if (
        isinstance(node_count, bool)
        or not isinstance(node_count, int)
        or not 1 <= node_count <= MAX_NODE_COUNT
    ):
        raise ParamError(
            f"param 'node_count' must be an integer from 1 to {MAX_NODE_COUNT}, got {node_count!r}"
        )
    scenarios = values.get("scenarios")
    if not isinstance(scenarios, list | tuple) or not scenarios:
        raise ParamError(f"param 'scenarios' must be a non-empty list of scenario names, got {scenarios!r}")
    unknown = sorted(set(scenarios) - set(scenario_names))
    if unknown:
        raise ParamError(
            f"param 'scenarios' names unknown scenarios {unknown}; known: {', '.join(sorted(scenario_names))}"
        )
    text: dict[str, str] = {}
    for name in ("kai_ref", "runner_image", "runner_tag"):
        value = values.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ParamError(f"param '{name}' must be a non-empty string, got {value!r}")
        text[name] = value.strip()
    if not _IMAGE.match(text["runner_image"]):
        raise ParamError(
            f"param 'runner_image' is not an image repository like ghcr.io/org/runner (the tag goes in "
            f"'runner_tag'): {text['runner_image']!r}"
        )
    if not _TAG.match(text["runner_tag"]):
        raise ParamError(f"param 'runner_tag' is not a valid image tag: {text['runner_tag']!r}")
    return RunParams(node_count=node_count, scenarios=tuple(scenarios), **text)
