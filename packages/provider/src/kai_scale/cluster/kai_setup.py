"""The tune_kai setup step: KAI's own objects patched by the deployment's tuning profile.

The profile is data (``kai_tuning``); this module applies it through the cluster hook.
"""

from __future__ import annotations

from pathlib import Path

from kai_scale.cluster import kai_tuning
from kai_scale.hooks.cluster import ClusterHook

KAI_SHARD_CRD = "schedulingshards.kai.scheduler"


def tune_kai(cluster: ClusterHook, *, include_dir: Path, profile: str) -> list[str]:
    """KAI tuned by a tuning profile (include/manifests/kai-tuning/), where KAI is installed.

    :param profile: the tuning profile's name (``KAI_SCALE_KAI_TUNING_PROFILE``).
    """
    if not cluster.crd_exists(KAI_SHARD_CRD):
        return ["KAI not installed: nothing to tune (ginkgo scenarios will be skipped)"]
    tuning = kai_tuning.load_profile(include_dir, profile)
    lines = [f"tuning profile {tuning.name} ({tuning.path})"]
    for patch in tuning.patches:
        cluster.merge_patch(
            api_version=patch["apiVersion"], kind=patch["kind"], name=patch["name"], patch=patch["patch"]
        )
        lines.append(f"patched {patch['kind']} {patch['name']}")
    return lines
