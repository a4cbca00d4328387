"""Preparing the target cluster for a run and putting it back afterwards.

Each step is idempotent and fast when its work is already done, because clearing a scenario task
re-runs the setup. Each returns the lines it logs, so the task log says what was found and done.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from kai_scale.cluster import chart_values
from kai_scale.cluster.placement import Placement, placed
from kai_scale.cluster.sources import SOURCE_MIRRORS_VARIABLE, Sources
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.hooks.helm import HelmHook, helm_available
from kai_scale.hooks.helm_commands import Chart
from kai_scale.hooks.release_manifests import ReleaseManifestError, ReleaseManifestsHook
from kai_scale_model import kai, labels
from kai_scale_model.installs import INSTALLS_FILE, ChartInstall, Installs, InstallsError, installs_from
from kai_scale_model.waiting import wait_for

STAGE_CRD = "stages.kwok.x-k8s.io"
NODEPOOL_CRD = "nodepools.kwok.sigs.run-ai.com"
SERVICE_MONITOR_CRD = "servicemonitors.monitoring.coreos.com"
NODEPOOL = ("kwok.sigs.run-ai.com/v1beta1", "NodePool")
NODEPOOL_NAME = "managed-nodepool"
POOL_NODE_LABEL = "kwok.x-k8s.io/controller"  # kwok-operator labels a pool's nodes with its name
ORIGINAL_COUNT_ANNOTATION = "kai-scale.dev/original-node-count"
GPU_RESOURCE = "nvidia.com/gpu"
POOL_DELETION_TIMEOUT_SECONDS = 300
# How long a CRD the setup applied may take to be served.
CRD_TIMEOUT_SECONDS = 60
FAKE_GPU_OPERATOR = "fake-gpu-operator"
MONITORING_RELEASES = ("kube-prometheus-stack", "pyroscope")
# The charts installs.yaml must declare: the setup installs each.
REQUIRED_RELEASES = (FAKE_GPU_OPERATOR, *MONITORING_RELEASES)
# What a chart values profile may turn off: not kube-prometheus-stack, whose Prometheus gives the runs
# their metrics (a cluster with its own leaves it to the cluster: KAI_SCALE_SKIP_INSTALLS).
OPTIONAL_RELEASES = frozenset({"pyroscope"})
SKIP_INSTALLS_VARIABLE = "KAI_SCALE_SKIP_INSTALLS"
# What the setup itself installed carries this role (see _infrastructure); teardown leaves it.
NOT_INFRASTRUCTURE = f"{labels.ROLE}!={labels.INFRASTRUCTURE}"
# Cluster-scoped objects KAI's suite creates without a label of its own and, when a spec fails, leaves
# behind; teardown removes the ones that did not exist when the run started. (Its namespaces and
# priority classes carry app=engine-e2e and are removed by that label.)
SNAPSHOT_KINDS: tuple[tuple[str, str], ...] = (
    ("scheduling.run.ai/v2", "Queue"),
    ("kai.scheduler/v1alpha1", "Topology"),
    ("kwok.sigs.run-ai.com/v1beta1", "NodePool"),
    ("kwok.x-k8s.io/v1alpha1", "Stage"),
)


class SetupError(RuntimeError):
    """A setup step cannot do its work; the message says what is missing and what to do."""


@dataclass(frozen=True, kw_only=True)
class Inventory:
    """What the preflight found in the cluster."""

    server_version: str
    """The API server's version."""
    kai_installed: bool
    """KAI's Queue CRD exists."""
    kai_deployments: tuple[str, ...]
    """Deployments in KAI's namespace (``kai_scale_model.kai.NAMESPACE``)."""
    kwok_installed: bool
    """KWOK's Stage CRD exists."""
    nodepool_crd: bool
    """kwok-operator's NodePool CRD exists."""
    prometheus_operator: bool
    """The ServiceMonitor CRD exists."""
    helm_on_worker: bool
    """helm is on the worker's PATH."""
    existing: dict[str, list[str]]
    """Names of the SNAPSHOT_KINDS objects at the start of the run, by kind."""

    def lines(self) -> list[str]:
        """A readable summary for the task log."""
        return [
            f"API server {self.server_version}",
            f"KAI: {'installed' if self.kai_installed else 'not installed'}"
            + (f" (deployments: {', '.join(self.kai_deployments)})" if self.kai_deployments else ""),
            f"KWOK: {'installed' if self.kwok_installed else 'not installed'}",
            f"kwok-operator NodePool CRD: {'installed' if self.nodepool_crd else 'not installed'}",
            f"Prometheus operator: {'installed' if self.prometheus_operator else 'not installed'}",
            f"helm on the worker: {'yes' if self.helm_on_worker else 'no'}",
        ]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, for XCom."""
        return asdict(self)


def _kind_key(api_version: str, kind: str) -> str:
    return f"{kind}.{api_version}"


def preflight(cluster: ClusterHook) -> Inventory:
    """Check the cluster answers, and take stock of what is installed."""
    version = cluster.server_version()
    kai_installed = cluster.crd_exists(kai.QUEUE_CRD)
    existing = {}
    for api_version, kind in SNAPSHOT_KINDS:
        existing[_kind_key(api_version, kind)] = cluster.names(api_version=api_version, kind=kind)
    return Inventory(
        server_version=version,
        kai_installed=kai_installed,
        kai_deployments=tuple(cluster.deployments(kai.NAMESPACE)) if kai_installed else (),
        kwok_installed=cluster.crd_exists(STAGE_CRD),
        nodepool_crd=cluster.crd_exists(NODEPOOL_CRD),
        prometheus_operator=cluster.crd_exists(SERVICE_MONITOR_CRD),
        helm_on_worker=helm_available(),
        existing=existing,
    )


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


def _apply_release(
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


def _wait_for_crd(cluster: ClusterHook, crd: str, *, owner: str) -> None:
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
        applied = _apply_release(
            cluster, kwok.manifests, releases=releases, sources=sources, placement=placement
        )
        # Its stages, applied next, need their CRD served.
        _wait_for_crd(cluster, STAGE_CRD, owner="KWOK")
        lines.append(f"installed KWOK {kwok.version}: {len(applied)} objects")
    stages = _apply_release(
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


def prepare_runner_access(cluster: ClusterHook, *, include_dir: Path, namespace: str) -> list[str]:
    """The runner pods' namespace, ServiceAccount, RBAC and admission policy (runner-rbac.yaml)."""
    objects = in_runner_namespace(load_manifest(include_dir, "runner-rbac.yaml"), namespace)
    return [f"applied {name}" for name in cluster.apply(objects)]


def in_runner_namespace(objects: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """runner-rbac.yaml's objects moved to the deployment's runner namespace (KAI_SCALE_NAMESPACE)."""
    moved = copy.deepcopy(objects)
    for item in moved:
        metadata = item["metadata"]
        if item["kind"] == "Namespace":
            metadata["name"] = namespace
        elif "namespace" in metadata:
            metadata["namespace"] = namespace
        for subject in item.get("subjects", []):
            if subject["kind"] == "ServiceAccount":
                subject["namespace"] = namespace
    return moved


def size_node_pool(
    cluster: ClusterHook,
    *,
    releases: ReleaseManifestsHook,
    installs: Installs,
    sources: Sources,
    placement: Placement,
    include_dir: Path,
    node_count: int,
) -> list[str]:
    """kwok-operator (if missing) and managed-nodepool at ``node_count``; remembers the count to restore."""
    lines = []
    if not cluster.crd_exists(NODEPOOL_CRD):
        operator = installs.kwok_operator
        _apply_release(cluster, operator.manifests, releases=releases, sources=sources, placement=placement)
        _wait_for_crd(cluster, NODEPOOL_CRD, owner="kwok-operator")
        lines.append(f"installed kwok-operator {operator.version}")
    current = cluster.get(api_version=NODEPOOL[0], kind=NODEPOOL[1], name=NODEPOOL_NAME)
    annotations = dict(((current or {}).get("metadata") or {}).get("annotations") or {})
    # Recorded once per run: a re-run setup (a retried scenario) must not record the run's own size.
    original = annotations.get(ORIGINAL_COUNT_ANNOTATION)
    if original is None:
        original = str(current["spec"]["nodeCount"]) if current else "absent"
    pool = load_manifest(include_dir, "managed-nodepool.yaml")[0]
    pool["spec"]["nodeCount"] = node_count
    pool["metadata"].setdefault("annotations", {})[ORIGINAL_COUNT_ANNOTATION] = original
    cluster.apply([pool])
    lines.append(f"NodePool {NODEPOOL_NAME}: {node_count} nodes (was {original})")
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


def wait_for_nodes(cluster: ClusterHook, *, node_count: int, timeout: float | None = None) -> list[str]:
    """Wait until the NodePool's nodes are Ready with GPUs allocatable (a watch, not a poll)."""
    deadline_seconds = timeout if timeout is not None else 300 + 0.1 * node_count
    total, ready = cluster.wait_for_ready_nodes(
        selector=f"{POOL_NODE_LABEL}={NODEPOOL_NAME}",
        resource=GPU_RESOURCE,
        count=node_count,
        timeout_seconds=deadline_seconds,
    )
    if ready >= node_count:
        return [f"{ready} nodes Ready with {GPU_RESOURCE}"]
    raise SetupError(
        f"only {ready} of {node_count} nodes of NodePool {NODEPOOL_NAME} are Ready with {GPU_RESOURCE} "
        f"after {deadline_seconds:.0f} s ({total} exist); check kwok-operator, KWOK and the fake GPU operator"
    )


SUITE_NAMESPACES = "app=engine-e2e"


def _ours(labels_of: dict[str, str]) -> bool:
    """A pod our workload made (any run's): it may be removed to free GPUs."""
    return (
        labels_of.get(labels.MANAGED_BY) == labels.MANAGER and labels_of.get(labels.ROLE) == labels.WORKLOAD
    )


def free_gpus(
    cluster: ClusterHook,
    *,
    scenario: str,
    timeout: float = 300,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Make sure no GPU is held before a scenario starts, removing what earlier scenarios left.

    A failed KAI spec can leave its GPU jobs (in the suite's namespaces, ``app=engine-e2e``) and a
    stopped workload its pods; both are removed. GPUs held by anything else are not ours to free:
    the scenario is not run, and the error names the pods.
    """
    holders = cluster.gpu_holders(GPU_RESOURCE)
    if not holders:
        return [f"all {GPU_RESOURCE} free before {scenario}"]
    suite_namespaces = set(cluster.names(api_version="v1", kind="Namespace", selector=SUITE_NAMESPACES))
    foreign = [h for h in holders if not _ours(h.labels) and h.namespace not in suite_namespaces]
    if foreign:
        held = ", ".join(f"{h.namespace}/{h.name} ({h.count})" for h in foreign[:10])
        raise SetupError(
            f"{sum(h.count for h in foreign)} {GPU_RESOURCE} are held by pods this pipeline did not make "
            f"({held}{', ...' if len(foreign) > 10 else ''}): {scenario} would not measure a free cluster. "
            "Remove them, then clear this task"
        )
    # Pods first and at once: they run on KWOK nodes, whose pods no kubelet confirms stopped.
    pods = sum(cluster.delete_pods_now(namespace=name) for name in sorted(suite_namespaces))
    count = cluster.delete_labelled(api_version="v1", kind="Namespace", selector=SUITE_NAMESPACES)
    workload = cluster.delete_pods_now(
        selector=f"{labels.MANAGED_BY}={labels.MANAGER},{labels.ROLE}={labels.WORKLOAD}"
    )
    lines = [
        f"deleted {count} namespaces of KAI's suite left by an earlier scenario ({SUITE_NAMESPACES}), "
        f"with their {pods} pods",
        f"deleted {workload} workload pods left by an earlier scenario",
    ]
    wait_for(
        lambda: sum(h.count for h in cluster.gpu_holders(GPU_RESOURCE)),
        until=lambda held: held == 0,
        what=f"every {GPU_RESOURCE} free",
        timeout=timeout,
        interval=2,
        error=lambda held: SetupError(
            f"{held} {GPU_RESOURCE} still held {timeout:.0f} s after removing the leftovers"
        ),
        clock=clock,
        sleep=sleep,
    )
    return [*lines, f"all {GPU_RESOURCE} free before {scenario}"]


def teardown(cluster: ClusterHook, *, run_id: str, existing: dict[str, list[str]] | None) -> list[str]:
    """Remove what the run created and scale the NodePool back.

    What the run created: objects with its labels, and what appeared since the preflight. Installed
    infrastructure (KWOK, operators, monitoring, KAI's tuning) stays for the next run.
    """
    # First, so an unreachable cluster is one clear error rather than a client traceback.
    lines = [f"API server {cluster.server_version()}"]
    run_selector = f"{labels.RUN_ID}={labels.label_value(run_id)}"
    for api_version, kind in (("v1", "Pod"), ("batch/v1", "Job"), ("v1", "Secret")):
        count = cluster.delete_labelled(api_version=api_version, kind=kind, selector=run_selector)
        lines.append(f"deleted {count} {kind}s labelled {run_selector}")
    for api_version, kind in (("v1", "Namespace"), ("scheduling.k8s.io/v1", "PriorityClass")):
        count = cluster.delete_labelled(api_version=api_version, kind=kind, selector="app=engine-e2e")
        lines.append(f"deleted {count} {kind}s of KAI's suite (app=engine-e2e)")
    if existing is None:
        lines.append("no preflight inventory: objects created by a failed suite were not looked for")
    else:
        for api_version, kind in SNAPSHOT_KINDS:
            before = set(existing.get(_kind_key(api_version, kind), []))
            if kind == "NodePool":
                before.add(NODEPOOL_NAME)  # the setup's own; scaled back below
            names = cluster.names(api_version=api_version, kind=kind, selector=NOT_INFRASTRUCTURE)
            for name in sorted(set(names) - before):
                cluster.delete(api_version=api_version, kind=kind, name=name)
                lines.append(f"deleted {kind} {name} (created during the run)")
    lines += _restore_node_pool(cluster)
    return lines


def _delete_node_pool(cluster: ClusterHook, *, node_count: int) -> None:
    """Delete managed-nodepool and wait until neither it nor a node of it is left.

    The next run must meet neither: kwok-operator counts every node with the pool's label as its own.
    kwok-operator 1.0.1 does not delete a pool well: the deletion bumps the pool's generation, so it
    deletes the pool's nodes, makes them again and leaves them to the garbage collector (3 writes a
    node); and a pool of 0 nodes it never deletes, failing a status update forever. So the pool is
    emptied first, then deleted without its finalizer, which then guards nothing.
    """
    pool_nodes = f"{POOL_NODE_LABEL}={NODEPOOL_NAME}"
    if node_count:
        cluster.merge_patch(
            api_version=NODEPOOL[0], kind=NODEPOOL[1], name=NODEPOOL_NAME, patch={"spec": {"nodeCount": 0}}
        )
    # As long as wait_for_nodes gives them to appear: the operator deletes one node per API call.
    timeout = POOL_DELETION_TIMEOUT_SECONDS + 0.1 * node_count
    wait_for(
        lambda: cluster.names(api_version="v1", kind="Node", selector=pool_nodes),
        until=lambda nodes: not nodes,
        what=f"the nodes of NodePool {NODEPOOL_NAME} deleted",
        timeout=timeout,
        interval=2,
        error=lambda _: SetupError(
            f"NodePool {NODEPOOL_NAME}, scaled to 0 to be deleted, still has nodes ({pool_nodes}) "
            f"after {timeout:.0f} s: check kwok-operator's log"
        ),
    )
    cluster.delete(api_version=NODEPOOL[0], kind=NODEPOOL[1], name=NODEPOOL_NAME)
    cluster.drop_finalizers(api_version=NODEPOOL[0], kind=NODEPOOL[1], name=NODEPOOL_NAME)


def _restore_node_pool(cluster: ClusterHook) -> list[str]:
    pool = cluster.get(api_version=NODEPOOL[0], kind=NODEPOOL[1], name=NODEPOOL_NAME)
    if pool is None:
        return [f"NodePool {NODEPOOL_NAME} absent"]
    original = ((pool.get("metadata") or {}).get("annotations") or {}).get(ORIGINAL_COUNT_ANNOTATION)
    if original is None:
        return [f"NodePool {NODEPOOL_NAME}: no original size recorded, left at {pool['spec']['nodeCount']}"]
    if original == "absent":
        _delete_node_pool(cluster, node_count=int(pool["spec"]["nodeCount"]))
        return [f"NodePool {NODEPOOL_NAME} deleted (the run created it)"]
    cluster.merge_patch(
        api_version=NODEPOOL[0],
        kind=NODEPOOL[1],
        name=NODEPOOL_NAME,
        patch={
            "metadata": {"annotations": {ORIGINAL_COUNT_ANNOTATION: None}},
            "spec": {"nodeCount": int(original)},
        },
    )
    return [f"NodePool {NODEPOOL_NAME} scaled back to {original} nodes"]
