"""What the cluster holds of the pipeline's and of KAI's, read the way an admin reads it (helm, kubectl)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from kai_scale.cluster.installs import REQUIRED_RELEASES
from kai_scale_model import labels
from localenv.environment import LocalEnvironment

# What the night's setup installs as infrastructure (and its teardown keeps): every chart it installs.
INFRASTRUCTURE_RELEASES = set(REQUIRED_RELEASES)
INFRASTRUCTURE_DEPLOYMENTS = {"kwok-controller", "kwok-operator-kwok-operator"}


def releases(local_env: LocalEnvironment) -> dict[str, str]:
    """Every helm release of the cluster, by name: its revision."""
    return {release["name"]: str(release["revision"]) for release in _helm_list(local_env)}


def release_statuses(local_env: LocalEnvironment) -> dict[str, str]:
    """Every helm release of the cluster, by name: its status (deployed, failed, pending-upgrade, ...)."""
    return {release["name"]: str(release["status"]) for release in _helm_list(local_env)}


def _helm_list(local_env: LocalEnvironment) -> list[dict[str, Any]]:
    listed = subprocess.run(
        [
            str(local_env.config.helm_dir / "helm"),
            "list",
            "--all-namespaces",
            "--all",
            "--output=json",
            f"--kubeconfig={local_env.config.kubeconfig}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(listed.stdout))


def infrastructure(local_env: LocalEnvironment) -> dict[str, str]:
    """The pipeline's infrastructure: helm releases by revision, labelled Deployments by uid."""
    found = {
        f"release/{name}": revision
        for name, revision in releases(local_env).items()
        if name in INFRASTRUCTURE_RELEASES
    }
    deployments = local_env.kubectl(
        "get",
        "deployments",
        "--all-namespaces",
        f"--selector={labels.ROLE}={labels.INFRASTRUCTURE}",
        "--output=jsonpath={range .items[*]}{.metadata.name}={.metadata.uid}{'\\n'}{end}",
    )
    for line in deployments.split():
        name, _, uid = line.partition("=")
        found[f"deployment/{name}"] = uid
    return found


@dataclass(frozen=True)
class BareCluster:
    """The restarted cluster before the first night: the pipeline's infrastructure and KAI's release."""

    infrastructure: dict[str, str]
    kai_revision: str
