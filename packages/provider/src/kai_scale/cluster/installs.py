"""What the setup installs around KAI: KWOK and its stages, the charts, KAI's ServiceMonitors.

At the versions include/manifests/installs.yaml pins, under the deployment's chart values profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from kai_scale.cluster import chart_values
from kai_scale.cluster.manifests import SetupError, apply_release, load_manifest, wait_for_crd
from kai_scale.cluster.placement import Placement
from kai_scale.cluster.sources import Sources
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.hooks.helm import HelmHook, helm_available
from kai_scale.hooks.helm_commands import Chart
from kai_scale.hooks.release_manifests import ReleaseManifestsHook
from kai_scale_model.installs import INSTALLS_FILE, ChartInstall, Installs, InstallsError, installs_from

STAGE_CRD = "stages.kwok.x-k8s.io"
SERVICE_MONITOR_CRD = "servicemonitors.monitoring.coreos.com"
FAKE_GPU_OPERATOR = "fake-gpu-operator"
MONITORING_RELEASES = ("kube-prometheus-stack", "pyroscope")
# The charts installs.yaml must declare: the setup installs each.
REQUIRED_RELEASES = (FAKE_GPU_OPERATOR, *MONITORING_RELEASES)
# What a chart values profile may turn off: not kube-prometheus-stack, whose Prometheus gives the runs
# their metrics (a cluster with its own leaves it to the cluster: KAI_SCALE_SKIP_INSTALLS).
OPTIONAL_RELEASES = frozenset({"pyroscope"})
SKIP_INSTALLS_VARIABLE = "KAI_SCALE_SKIP_INSTALLS"


@dataclass(frozen=True, kw_only=True)
class DeploymentInstalls:
    """include/manifests/installs.yaml as a deployment installs it: under its chart values profile."""

    pins: Installs
    """installs.yaml, with the profile's ``--set`` values set over each chart's."""
    chart_values: chart_values.Profile
    """The deployment's chart values profile: its name, and the releases it turns off."""


def read_installs(include_dir: Path) -> Installs:
    """include/manifests/installs.yaml as written; InstallsError names the file and the field."""
    path = include_dir / INSTALLS_FILE
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise InstallsError(f"installs file {path}: not valid YAML: {error}") from error
    installs = installs_from(document, path=path)
    if missing := sorted(set(REQUIRED_RELEASES) - set(installs.charts)):
        raise InstallsError(
            f"installs file {path}: 'charts' lacks {', '.join(missing)}, which the setup installs"
        )
    return installs


def load_installs(
    include_dir: Path, *, chart_values_profile: str = chart_values.DEFAULT_PROFILE
) -> DeploymentInstalls:
    """include/manifests/installs.yaml: pinned versions of what the setup installs.

    :param chart_values_profile: the deployment's chart values profile (include/manifests/chart-values/),
        set over each chart's ``set`` values.
    """
    installs = read_installs(include_dir)
    profile = chart_values.load_profile(
        include_dir, chart_values_profile, releases=set(installs.charts), optional=OPTIONAL_RELEASES
    )
    charts = {
        release: chart.model_copy(update={"values": {**chart.values, **profile.values.get(release, {})}})
        for release, chart in installs.charts.items()
    }
    return DeploymentInstalls(pins=installs.model_copy(update={"charts": charts}), chart_values=profile)


def install_kwok(
    cluster: ClusterHook,
    *,
    releases: ReleaseManifestsHook,
    installs: Installs,
    sources: Sources,
    placement: Placement,
) -> list[str]:
    """KWOK and its fast stages, without the stages KAI's setup removes (pod-complete).

    The stages are applied on every run (an unchanged apply changes nothing), so a cluster whose stages
    went missing is repaired rather than left with nodes that never become Ready.
    """
    kwok = installs.kwok
    lines = []
    if cluster.crd_exists(STAGE_CRD):
        lines.append("KWOK already installed")
    else:
        applied = apply_release(
            cluster, kwok.manifests, releases=releases, sources=sources, placement=placement
        )
        # Its stages, applied next, need their CRD served.
        wait_for_crd(cluster, STAGE_CRD, owner="KWOK")
        lines.append(f"installed KWOK {kwok.version}: {len(applied)} objects")
    stages = apply_release(
        cluster,
        kwok.stages,
        releases=releases,
        sources=sources,
        placement=placement,
        leave_out=set(kwok.delete_stages),
    )
    lines.append(f"applied KWOK {kwok.version}'s stages: {', '.join(stages)}")
    for stage in kwok.delete_stages:
        deleted = cluster.delete(api_version="kwok.x-k8s.io/v1alpha1", kind="Stage", name=stage)
        lines.append(f"stage {stage}: {'deleted' if deleted else 'absent'}")
    return lines


def _chart(release: str, spec: ChartInstall, *, sources: Sources, placement: Placement) -> Chart:
    source = sources.resolve(spec.chart)
    repo = sources.resolve(spec.repo).reference if spec.repo else None
    return Chart(
        release=release,
        chart=source.reference,
        version=spec.version,
        namespace=spec.namespace,
        repo=repo,
        values=dict(spec.values),
        plain_http=source.plain_http,
        post_renderer=placement.post_renderer(),
    )


def _require_helm(what: str) -> None:
    if not helm_available():
        raise SetupError(
            f"helm is not on the worker's PATH: the setup installs {what} with it; install helm there"
        )


def install_fake_gpu_operator(
    cluster: ClusterHook, *, helm: HelmHook, installs: Installs, sources: Sources, placement: Placement
) -> list[str]:
    """The fake GPU operator, which gives the KWOK nodes their GPUs, unless some other install has it."""
    spec = installs.charts[FAKE_GPU_OPERATOR]
    topology = cluster.get(api_version="v1", kind="ConfigMap", name="topology", namespace=spec.namespace)
    annotations = ((topology or {}).get("metadata") or {}).get("annotations") or {}
    if topology and annotations.get("meta.helm.sh/release-name") != FAKE_GPU_OPERATOR:
        # Installed some other way: helm would refuse to adopt its objects, and it is not ours to change.
        return ["fake GPU operator already installed (not by this pipeline's helm release): left as it is"]
    _require_helm("the fake GPU operator")
    chart = _chart(FAKE_GPU_OPERATOR, spec, sources=sources, placement=placement)
    changed = helm.ensure_release(chart)
    state = "installed" if changed else "up to date"
    lines = [f"{FAKE_GPU_OPERATOR} {spec.version} {state} from {chart.chart}"]
    for deployment in spec.delete_deployments:
        deleted = cluster.delete(
            api_version="apps/v1", kind="Deployment", name=deployment, namespace=spec.namespace
        )
        lines.append(f"deployment {deployment}: {'deleted' if deleted else 'absent'}")
    return lines


def install_monitoring(
    *,
    helm: HelmHook,
    installs: DeploymentInstalls,
    sources: Sources,
    placement: Placement,
    skip: frozenset[str] = frozenset(),
) -> list[str]:
    """kube-prometheus-stack and Pyroscope, less those the deployment leaves or turns off.

    A release is left to the cluster when it is in ``skip`` (the cluster has its own), and turned off
    by the chart values profile when the deployment cannot run it.
    """
    charts = installs.pins.charts
    releases = []
    lines = []
    for release in MONITORING_RELEASES:
        if release in skip:
            lines.append(
                f"{release}: left to the cluster ({SKIP_INSTALLS_VARIABLE}), not installed by the setup"
            )
        elif release in installs.chart_values.turned_off:
            lines.append(
                f"{release}: turned off by the chart values profile {installs.chart_values.name!r} "
                f"({chart_values.PROFILE_VARIABLE}), not installed"
            )
        else:
            releases.append(release)
    if not releases:
        return lines
    _require_helm("the monitoring stack")
    for release in releases:
        chart = _chart(release, charts[release], sources=sources, placement=placement)
        changed = helm.ensure_release(chart)
        lines.append(f"{release} {charts[release].version} {'installed' if changed else 'up to date'}")
    return lines


def install_service_monitors(cluster: ClusterHook, *, include_dir: Path) -> list[str]:
    """ServiceMonitors for KAI's scheduler, binder and queue controller, where Prometheus' operator runs."""
    if not cluster.crd_exists(SERVICE_MONITOR_CRD):
        return ["no ServiceMonitor CRD (no Prometheus operator): nothing to apply"]
    return [f"applied {name}" for name in cluster.apply(load_manifest(include_dir, "service-monitors.yaml"))]
