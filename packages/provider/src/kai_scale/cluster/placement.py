"""Where the pods of what the setup installs run: the deployment's system nodes.

The charts the setup installs (the fake GPU operator's, the monitoring stack's) have no values for
their pods' node selector and tolerations, so helm runs this module as its post-renderer
(``kai-scale-place-pods --placement <json>``): it reads the rendered manifests on stdin and writes them
back with the placement added to every pod template but a DaemonSet's (a DaemonSet picks its nodes
itself: the fake GPU operator's select real GPU nodes).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

COMMAND = "kai-scale-place-pods"
# Where each kind keeps its pod template's spec.
_POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    # The Prometheus operator's own kinds: it makes their StatefulSets, after helm.
    "Prometheus": ("spec",),
    "Alertmanager": ("spec",),
}


@dataclass(frozen=True)
class Placement:
    """A node selector and the tolerations of the nodes it selects, as a pod spec writes them."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.node_selector or self.tolerations)

    def to_json(self) -> str:
        """The ``--placement`` argument."""
        return json.dumps({"nodeSelector": dict(self.node_selector), "tolerations": list(self.tolerations)})

    def post_renderer(self) -> tuple[str, ...]:
        """Helm's ``--post-renderer`` command and its arguments; empty when there is nothing to place."""
        if not self:
            return ()
        return (_command_path(), "--placement", self.to_json())


def _command_path() -> str:
    """The command of this distribution: beside the running Python (a virtualenv), else on the PATH."""
    beside = Path(sys.executable).with_name(COMMAND)
    return str(beside) if beside.exists() else shutil.which(COMMAND) or COMMAND


def placed(documents: Iterable[Any], placement: Placement) -> list[Any]:
    """The documents, each pod template (but a DaemonSet's) with the placement merged in."""
    result = []
    for document in documents:
        path = _POD_SPEC_PATHS.get(document.get("kind", "")) if isinstance(document, dict) else None
        if path is not None:
            spec = document
            for key in path:
                spec = spec.setdefault(key, {})
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **placement.node_selector}
            tolerations = list(spec.get("tolerations") or [])
            tolerations += [dict(t) for t in placement.tolerations if t not in tolerations]
            spec["tolerations"] = tolerations
        result.append(document)
    return result


def main(argv: list[str] | None = None) -> int:
    """Helm's post-renderer: rendered manifests on stdin, placed manifests on stdout."""
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__)
    parser.add_argument("--placement", required=True, help='{"nodeSelector": {...}, "tolerations": [...]}')
    arguments = parser.parse_args(argv)
    given = json.loads(arguments.placement)
    placement = Placement(
        node_selector=given.get("nodeSelector") or {}, tolerations=tuple(given.get("tolerations") or ())
    )
    documents = [document for document in yaml.safe_load_all(sys.stdin) if document]
    yaml.safe_dump_all(placed(documents, placement), sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
