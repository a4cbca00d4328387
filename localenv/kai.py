"""KAI installed as a cluster admin installs it, from KAI source.

``localenv/images.sh`` builds KAI's images from the source tree (``KAI_SOURCE``) and pushes them to
the local registry under KAI's release repository, tagged with the commit; this module installs the
chart of the same tree with ``helm upgrade -i``, in the namespace the pipeline looks for KAI in
(``kai_scale_model.kai``), and waits until KAI's operator reports its services available. The
operator runs them as pods on the system node, as a cluster's system pods run.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kai_scale_model.kai import NAMESPACE
from kai_scale_model.waiting import Deadline, wait_for
from localenv.processes import ComponentError
from localenv.source_images import BuiltImages

RELEASE = "kai-scheduler"
CHART_IN_SOURCE = Path("deployments") / "kai-scheduler"
# KAI's operator reports on its Config object whether every service it runs is available.
CONFIG = "configs.kai.scheduler/kai-config"
OPERATOR_DEPLOYMENT = "kai-operator"
# Made by the chart for the binder's GPU reservation pods, and kept by helm on uninstall.
RESERVATION_NAMESPACE = "kai-resource-reservation"
READY_TIMEOUT_SECONDS = 300


def chart_values(
    images: BuiltImages, *, node_selector: dict[str, str], tolerations: list[dict[str, str]]
) -> str:
    """The chart's values: KAI's images as built, its pods on the system node."""
    values: dict[str, Any] = {
        "global": {
            "registry": images.kai_image_repository,
            "tag": images.kai_image_tag,
            "nodeSelector": node_selector,
            "tolerations": tolerations,
        }
    }
    return yaml.safe_dump(values)


def install(
    images: BuiltImages,
    *,
    helm: Path,
    kubeconfig: Path,
    kubectl: Callable[..., str],
    logs_dir: Path,
    node_selector: dict[str, str],
    tolerations: list[dict[str, str]],
) -> None:
    """``helm upgrade -i`` KAI's chart, then wait for the operator to report KAI available.

    Raises ComponentError naming what failed and the log to read.
    """
    chart = images.kai_source / CHART_IN_SOURCE
    log_path = logs_dir / "kai.log"
    values = chart_values(images, node_selector=node_selector, tolerations=tolerations)
    if _deployed_values(helm, kubeconfig) == yaml.safe_load(values):
        _wait_available(kubectl, log_path)  # already installed from this build
        return
    values_path = logs_dir / "kai-values.yaml"
    values_path.write_text(values)
    argv = [
        str(helm),
        "upgrade",
        "--install",
        RELEASE,
        str(chart),
        f"--namespace={NAMESPACE}",
        "--create-namespace",
        f"--kubeconfig={kubeconfig}",
        f"--values={values_path}",
        # As KAI's README installs it, without --wait: helm waits for the hook jobs (CRD upgrade,
        # kai-config) anyway, and KAI is ready when its operator says so (below), not when helm's
        # view of the operator's Deployment does (its readiness probe alone costs 10 s).
        f"--timeout={READY_TIMEOUT_SECONDS}s",
    ]
    with log_path.open("a") as log:
        log.write(f"$ {' '.join(argv)}\n")
        log.flush()
        result = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0:
        _write_diagnostics(kubectl, log_path)
        raise ComponentError(
            f"KAI: helm could not install the chart {chart} at {images.kai_commit[:12]} "
            f"(exit {result.returncode}); see {log_path}"
        )
    _wait_available(kubectl, log_path)


def _deployed_values(helm: Path, kubeconfig: Path) -> Any:
    """The values of the deployed release, or None when it is not deployed."""
    common = [RELEASE, f"--namespace={NAMESPACE}", f"--kubeconfig={kubeconfig}", "--output=yaml"]
    status = subprocess.run([str(helm), "status", *common], capture_output=True, text=True, check=False)
    if (
        status.returncode != 0
        or (yaml.safe_load(status.stdout) or {}).get("info", {}).get("status") != "deployed"
    ):
        return None
    values = subprocess.run(
        [str(helm), "get", "values", *common], capture_output=True, text=True, check=False
    )
    if values.returncode != 0:
        raise ComponentError(f"KAI: helm get values of the release failed: {values.stderr.strip()}")
    return yaml.safe_load(values.stdout)


def _wait_available(kubectl: Callable[..., str], log_path: Path) -> None:
    """Until the operator runs its current version and reports KAI available for kai-config as it is now.

    kai-config exists once helm returns (its hook job wrote it): missing, it never comes.
    """
    deadline = Deadline(seconds=READY_TIMEOUT_SECONDS)
    # After an upgrade: the new operator, not the one being replaced, is what reports.
    rolled_out = "successfully rolled out" in kubectl(
        "rollout",
        "status",
        f"--namespace={NAMESPACE}",
        f"deployment/{OPERATOR_DEPLOYMENT}",
        f"--timeout={READY_TIMEOUT_SECONDS}s",
        check=False,
    )

    def kai_config() -> dict[str, Any]:
        config = kubectl("get", CONFIG, "--output=json", "--ignore-not-found")
        if not config.strip():
            _write_diagnostics(kubectl, log_path)
            raise ComponentError(f"KAI: the chart installed but wrote no {CONFIG}; see {log_path}")
        return dict(json.loads(config))

    def not_available(_: object) -> ComponentError:
        _write_diagnostics(kubectl, log_path)
        return ComponentError(
            f"KAI: the operator did not report KAI available within {READY_TIMEOUT_SECONDS} s "
            f"({_conditions(kubectl)}); see {log_path}"
        )

    wait_for(
        kai_config,
        until=lambda config: rolled_out and reports_available(config),
        what="KAI available",
        # What the rollout's wait left of the deadline.
        timeout=deadline.remaining(),
        interval=1,
        error=not_available,
    )


def reports_available(config: dict[str, Any]) -> bool:
    """Whether KAI's Config says, for its current generation, that every service is available.

    After an upgrade the condition still tells of the previous kai-config until the operator has
    reconciled the new one: only a condition observed at the Config's generation counts.
    """
    generation = config.get("metadata", {}).get("generation")
    return generation is not None and any(
        condition.get("type") == "Available"
        and condition.get("status") == "True"
        and condition.get("observedGeneration") == generation
        for condition in config.get("status", {}).get("conditions", [])
    )


def _conditions(kubectl: Callable[..., str]) -> str:
    output = kubectl("get", CONFIG, "-o", "jsonpath={.status.conditions}", check=False)
    return output.strip() or "no conditions reported"


def _write_diagnostics(kubectl: Callable[..., str], log_path: Path) -> None:
    """What the namespace holds and why its pods are not ready, appended to the log."""
    sections = {
        "Config kai-config": ("get", CONFIG, "-o", "yaml"),
        "pods": ("get", "pods", f"--namespace={NAMESPACE}", "-o", "wide"),
        "pods, described": ("describe", "pods", f"--namespace={NAMESPACE}"),
        "events": ("get", "events", f"--namespace={NAMESPACE}", "--sort-by=.lastTimestamp"),
        "containers' logs": (
            "logs",
            f"--namespace={NAMESPACE}",
            "--all-containers",
            "--prefix",
            "--tail=50",
            "--selector=app.kubernetes.io/managed-by=kai-operator",
        ),
    }
    with log_path.open("a") as log:
        for title, args in sections.items():
            log.write(f"\n--- {title} ---\n{kubectl(*args, check=False)}")


def uninstall(images: BuiltImages, *, helm: Path, kubeconfig: Path, kubectl: Callable[..., str]) -> None:
    """``helm uninstall``, then what the chart keeps: its CRDs (and so their objects) and namespaces.

    The chart's post-delete hook runs KAI's own image. When it cannot run (a KAI whose images never
    ran), helm gives up on it after READY_TIMEOUT_SECONDS with an error, but has removed the release:
    then the error is printed and the namespace's deletion below takes the stuck hook job with it.
    """
    argv = [str(helm), f"--namespace={NAMESPACE}", f"--kubeconfig={kubeconfig}"]
    uninstalled = subprocess.run(
        [*argv, "uninstall", RELEASE, "--ignore-not-found", "--wait", f"--timeout={READY_TIMEOUT_SECONDS}s"],
        capture_output=True,
        text=True,
        check=False,
    )
    if uninstalled.returncode != 0:
        status = subprocess.run([*argv, "status", RELEASE], capture_output=True, text=True, check=False)
        if status.returncode == 0:
            raise ComponentError(f"KAI: helm uninstall failed: {uninstalled.stderr.strip()}")
        print(f"KAI: release removed, its uninstall hook did not finish: {uninstalled.stderr.strip()}")
    crds = images.kai_source / CHART_IN_SOURCE / "crds"
    kubectl("delete", f"--filename={crds}", "--recursive", "--ignore-not-found", "--wait=true")
    kubectl("delete", "namespace", NAMESPACE, RESERVATION_NAMESPACE, "--ignore-not-found", "--wait=true")
