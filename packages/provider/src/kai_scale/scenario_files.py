"""Reading scenario files: every error names the file and the field."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from kai_scale_model.scenario import Scenario

# libyaml's loader when PyYAML has it (its wheels do): the pure-Python one dominated DAG parse time.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ScenarioFileError(ValueError):
    """A scenario file that cannot be used; the message names the file, the field and the problem."""


def _location(parts: tuple[int | str, ...]) -> str:
    # pydantic puts the discriminated union's tag in the path ("run.ginkgo.focus"); users wrote "run.focus".
    names = [str(p) for p in parts if p not in ("ginkgo", "workload")]
    return ".".join(names) or "(top level)"


def load_scenario(path: Path) -> Scenario:
    """Parse and validate one scenario file."""
    try:
        document = yaml.load(path.read_text(), Loader=_YAML_LOADER)
    except yaml.YAMLError as error:
        raise ScenarioFileError(f"scenario file {path}: not valid YAML: {error}") from error
    if not isinstance(document, dict):
        raise ScenarioFileError(
            f"scenario file {path}: expected a mapping of fields, got {type(document).__name__}"
        )
    try:
        scenario = Scenario.model_validate(document)
    except ValidationError as error:
        problems = "; ".join(f"'{_location(e['loc'])}' {e['msg']}" for e in error.errors())
        raise ScenarioFileError(f"scenario file {path}: {problems}") from error
    if scenario.name != path.stem:
        raise ScenarioFileError(f"scenario file {path}: 'name' must match the file name {path.stem!r}")
    return scenario


def load_scenarios(directory: Path) -> tuple[Scenario, ...]:
    """All scenarios of ``directory`` (``*.yaml``), sorted by name; raises on the first bad file."""
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise ScenarioFileError(f"no scenario files (*.yaml) in {directory}")
    # By scenario name, not file name: "reclaim-full-node.yaml" sorts before "reclaim.yaml".
    return tuple(sorted((load_scenario(path) for path in files), key=lambda scenario: scenario.name))
