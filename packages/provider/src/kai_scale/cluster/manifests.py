"""What the setup steps share: their error, the objects of include/manifests/, and release manifests.

Release manifests (KWOK's, kwok-operator's) are fetched from their publisher or its mirror and applied
as the setup's infrastructure, which the teardown leaves for the next run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from kai_scale.cluster.placement import Placement, placed
from kai_scale.cluster.sources import SOURCE_MIRRORS_VARIABLE, Sources
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.hooks.release_manifests import ReleaseManifestError, ReleaseManifestsHook
from kai_scale_model import labels
from kai_scale_model.waiting import wait_for

# How long a CRD the setup applied may take to be served.
CRD_TIMEOUT_SECONDS = 60


class SetupError(RuntimeError):
    """A setup step cannot do its work; the message says what is missing and what to do."""


def load_manifest(include_dir: Path, name: str) -> list[dict[str, Any]]:
    """The objects of include/manifests/<name>."""
    return [doc for doc in yaml.safe_load_all((include_dir / "manifests" / name).read_text()) if doc]


def _fetch_manifests(
    urls: Sequence[str], *, releases: ReleaseManifestsHook, sources: Sources
) -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = []
    for url in urls:
        source = sources.resolve(url)
        where = url if source.reference == url else f"{source.reference} (the mirror of {url})"
        try:
            documents += releases.documents(source.reference)
        except ReleaseManifestError as error:
            raise SetupError(
                f"cannot download {where}: {error.reason}; the worker needs to reach it to install it "
                f"(or a mirror of it: {SOURCE_MIRRORS_VARIABLE})"
            ) from error
    return documents


def _infrastructure(documents: list[dict[str, Any]], placement: Placement) -> list[dict[str, Any]]:
    """Release manifests as the setup applies them: on the system nodes, labelled as infrastructure.

    The label keeps teardown from taking them for leftovers of the run (it removes the Stages,
    NodePools and Queues that appeared since the preflight, but not these).
    """
    for document in documents:
        document.setdefault("metadata", {}).setdefault("labels", {})[labels.ROLE] = labels.INFRASTRUCTURE
    return placed(documents, placement)


def apply_release(
    cluster: ClusterHook,
    urls: Sequence[str],
    *,
    releases: ReleaseManifestsHook,
    sources: Sources,
    placement: Placement,
    leave_out: set[str] | None = None,
) -> list[str]:
    """Download release manifests (or their mirror) and apply them as the setup's infrastructure.

    ``leave_out``: names of objects not to apply (KAI's setup deletes kwok's pod-complete stage).
    """
    documents = [
        d
        for d in _fetch_manifests(urls, releases=releases, sources=sources)
        if d["metadata"]["name"] not in (leave_out or set())
    ]
    return cluster.apply(_infrastructure(documents, placement))


def wait_for_crd(cluster: ClusterHook, crd: str, *, owner: str) -> None:
    """Wait until a CRD the setup applied is served; SetupError after CRD_TIMEOUT_SECONDS."""
    wait_for(
        lambda: cluster.crd_established(crd),
        until=bool,
        what=f"{owner}'s CRD {crd} established",
        timeout=CRD_TIMEOUT_SECONDS,
        interval=1,
        error=lambda _: SetupError(
            f"{owner}'s CRD {crd} was applied, not established in {CRD_TIMEOUT_SECONDS} s"
        ),
    )
