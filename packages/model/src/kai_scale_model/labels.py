"""Labels on everything the pipeline creates, so cleanup can select by run and scenario. Pure."""

from __future__ import annotations

import re

RUN_ID = "kai-scale.dev/run-id"
SCENARIO = "kai-scale.dev/scenario"
ROLE = "kai-scale.dev/role"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "kai-scale-pipeline"
# The ROLE of what the setup installs and every run keeps (KWOK's stages, operators).
INFRASTRUCTURE = "infrastructure"
# The ROLE of a runner pod, of the Secret of its upload URLs, and of the pods a workload scenario makes.
RUNNER = "runner"
RUNNER_OUTPUTS = "runner-outputs"
WORKLOAD = "workload"

_INVALID = re.compile(r"[^A-Za-z0-9._-]")


def label_value(text: str) -> str:
    """``text`` made a valid label value: at most 63 characters of [A-Za-z0-9._-], alphanumeric ends."""
    return _INVALID.sub("-", text)[:63].strip("-._")


def object_labels(*, run_id: str, scenario: str | None = None, role: str) -> dict[str, str]:
    """Labels for an object the pipeline creates for ``run_id`` (and ``scenario``, if it has one)."""
    labels = {MANAGED_BY: MANAGER, RUN_ID: label_value(run_id), ROLE: role}
    if scenario is not None:
        labels[SCENARIO] = label_value(scenario)
    return labels


def selector(labels: dict[str, str]) -> str:
    """A label selector matching exactly these labels."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
