"""The DAG's parameters: one JSON schema, used by the trigger form and checked again before use. Pure.

Airflow validates each known param against its schema when a run is triggered, but merges keys it
does not know into the run unchecked (``SerializedParamsDict.deep_merge`` in Airflow 3.3), so a typo
such as ``node_cout`` would run with the default. The API server refuses such a trigger
(``kai_scale.trigger_guard``, through ``unknown_params_problem``); ``check_params`` validates the whole
run conf against the same schema, closed to other keys, in the run's first task, for runs that did
not come through the API: before anything touches the cluster, the run fails naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

DEFAULT_NODE_COUNT = 500
MAX_NODE_COUNT = 10_000
DEFAULT_KAI_REF = "main"
# A tag (the reference grammar's) or a digest, which pins exactly what runs.
_TAG_OR_DIGEST = r"^(?:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|sha256:[a-f0-9]{64})$"


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
    runner_tag: str
    """Runner image tag, or ``sha256:<digest>``; the repository is a deployment setting."""


def image_reference(repository: str, tag_or_digest: str) -> str:
    """``repo:tag``, or ``repo@sha256:...`` for a digest."""
    separator = "@" if tag_or_digest.startswith("sha256:") else ":"
    return f"{repository}{separator}{tag_or_digest}"


def param_schema(*, scenario_names: Sequence[str], enabled: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Arguments for ``airflow.sdk.Param`` per parameter (default, JSON schema, help)."""
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
            "pattern": r"\S",
            "title": "KAI ref",
            "description": "KAI scheduler git ref the runner image's suite was built from.",
        },
        "runner_tag": {
            "default": DEFAULT_KAI_REF,
            "type": "string",
            "pattern": _TAG_OR_DIGEST,
            "title": "Runner image tag or digest",
            "description": "Tag of the runner image (by convention the KAI ref it was built from), or "
            "sha256:<digest>. The repository is the deployment's KAI_SCALE_RUNNER_IMAGE.",
        },
    }


def conf_schema(*, scenario_names: Sequence[str]) -> dict[str, Any]:
    """The whole run conf as one JSON schema: the params' schemas, every one required, no other key."""
    properties = param_schema(scenario_names=scenario_names, enabled=scenario_names)
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(properties),
        "additionalProperties": False,
    }


def unknown_params_problem(conf: Mapping[str, Any]) -> str | None:
    """What is wrong with a run conf's keys, naming those the DAG does not know; None when none."""
    known = sorted(param_schema(scenario_names=(), enabled=()))
    unknown = sorted(set(conf) - set(known))
    if not unknown:
        return None
    return f"unknown param(s) {', '.join(map(repr, unknown))}; the DAG's params are {', '.join(known)}"


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        instance: Mapping[str, Any] = error.instance  # type: ignore[assignment]  # the conf: an object
        return unknown_params_problem(instance) or error.message
    where = "/".join(str(part) for part in error.absolute_path)
    return f"param '{where}': {error.message}" if where else error.message


def check_params(values: Mapping[str, Any], *, scenario_names: Sequence[str]) -> RunParams:
    """Validate a run's params against ``conf_schema``; ParamError names each wrong or unknown key."""
    schema = conf_schema(scenario_names=scenario_names)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(dict(values)), key=lambda e: list(e.absolute_path))
    if errors:
        raise ParamError("; ".join(_message(error) for error in errors))
    return RunParams(
        node_count=values["node_count"],
        scenarios=tuple(values["scenarios"]),
        kai_ref=values["kai_ref"].strip(),
        runner_tag=values["runner_tag"],
    )
