"""The tune_kai setup step: KAI's own objects patched by a tuning profile, and its operator's rollout awaited.

The profile is data (``kai_tuning``); what its rollout must look like is a pure comparison
(``kai_rollout``); this module does the two through the cluster hook.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from kai_scale.cluster import kai_rollout, kai_tuning
from kai_scale.cluster.manifests import SetupError
from kai_scale.hooks.cluster import ClusterHook
from kai_scale_model import kai
from kai_scale_model.validation import Model, validated
from kai_scale_model.waiting import wait_for

KAI_CONFIG = ("kai.scheduler/v1", "Config", "kai-config")
# KAI's services restart from images already on the node (their Deployments use the Recreate strategy):
# ample time for that, and a rollout that hangs fails the setup instead of a scenario measuring an
# untuned KAI.
KAI_ROLLOUT_TIMEOUT_SECONDS = 300.0
KAI_ROLLOUT_POLL_SECONDS = 3.0


def tune_kai(
    cluster: ClusterHook,
    *,
    include_dir: Path,
    profile: str,
    timeout: float = KAI_ROLLOUT_TIMEOUT_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """KAI tuned by a tuning profile (include/manifests/kai-tuning/), where KAI is installed.

    Patches KAI's own objects, then waits until KAI's operator has rolled the tuned values out to its
    services' Deployments: what the scenarios measure is the tuned KAI, not the one before.

    :param profile: the tuning profile's name (``KAI_SCALE_KAI_TUNING_PROFILE``).
    :param timeout: seconds to wait for the rollout; SetupError after, naming what is not rolled out.
    """
    if not cluster.crd_exists(kai.SHARD_CRD):
        return ["KAI not installed: nothing to tune (the scenarios that need KAI will not run)"]
    tuning = kai_tuning.load_profile(include_dir, profile)
    lines = [f"tuning profile {tuning.name} ({tuning.path})"]
    for patch in tuning.patches:
        cluster.merge_patch(
            api_version=patch.api_version, kind=patch.kind, name=patch.name, patch=patch.patch
        )
        lines.append(f"patched {patch.kind} {patch.name}")
    return lines + _wait_for_kai_rollout(cluster, tuning, timeout=timeout, clock=clock, sleep=sleep)


def _wait_for_kai_rollout(
    cluster: ClusterHook,
    tuning: kai_tuning.TuningProfile,
    *,
    timeout: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> list[str]:
    """Poll KAI's Deployments (a handful, every few seconds) until they carry the profile, rolled out."""
    config_name = next((p.name for p in tuning.patches if p.kind == "Config"), KAI_CONFIG[2])
    config = cluster.get(api_version=KAI_CONFIG[0], kind=KAI_CONFIG[1], name=config_name)
    namespace, scheduler_name = kai_rollout.operand_names(
        None if config is None else _served(kai_rollout.KaiConfig, config, what=f"KAI's Config {config_name}")
    )
    expected = kai_rollout.expected_deployments(tuning.patches, scheduler_name=scheduler_name)

    def problems() -> list[str]:
        served = cluster.deployment_objects(namespace)
        # Only the profile's: a Deployment of KAI's namespace it does not concern is none of its business.
        deployments = {
            e.name: _served(kai_rollout.Deployment, served[e.name], what=f"deployment {namespace}/{e.name}")
            for e in expected
            if e.name in served
        }
        return [p for e in expected for p in kai_rollout.rollout_problems(e, deployments.get(e.name))]

    wait_for(
        problems,
        until=lambda found: not found,
        what=f"tuning profile {tuning.name} rolled out",
        timeout=timeout,
        interval=KAI_ROLLOUT_POLL_SECONDS,
        error=lambda found: SetupError(
            f"KAI's operator did not roll tuning profile {tuning.name} out in namespace {namespace} "
            f"within {timeout:.0f} s: {'; '.join(found)}. Read the log of KAI's operator "
            f"(deployment kai-operator) and the pods: kubectl -n {namespace} get pods; a scheduler arg "
            "the scheduler does not know is dropped by the operator, so it never appears"
        ),
        clock=clock,
        sleep=sleep,
    )
    lines = [
        f"KAI's operator rolled tuning profile {tuning.name} out: "
        + ", ".join(f"{namespace}/{e.name}" for e in expected)
    ]
    if unchecked := kai_rollout.unchecked_fields(tuning.patches):
        lines.append(f"set, but not compared with the Deployments: {', '.join(unchecked)}")
    return lines


def _served(model: type[Model], body: object, *, what: str) -> Model:
    """``body`` as the API served it, read as ``model``; a SetupError naming ``what`` and the bad fields."""
    return validated(model, body, what=f"{what} as the API served it", error=SetupError)
