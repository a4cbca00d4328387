"""The real KAI, built from source and installed from its chart (localenv/images.sh, localenv/kai.py).

KAI's operator runs KAI's services as pods on the real node, from the images the local registry
serves; KAI schedules a pod; and the operator really reacts to ``kai-config``, as KAI's scale suite
relies on when it switches the scheduler off and on.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.utils import parse_quantity

from kai_scale.cluster.kai_setup import tune_kai
from kai_scale.cluster.tasks import setup_step
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.scenario_files import load_scenarios
from kai_scale.settings import PipelineSettings
from kai_scale_model.kai import NAMESPACE, SCHEDULER_NAME
from localenv import kai as kai_chart
from localenv.environment import LocalEnvironment
from localenv.kai import CHART_IN_SOURCE, RELEASE
from localenv.kai import install as install_kai
from localenv.node_config import NODE_NAME, PAUSE_IMAGE, SYSTEM_NODE_LABEL, SYSTEM_NODE_TAINT
from localenv.processes import ComponentError
from localenv.source_images import BuiltImages
from tests.conftest import REPO
from tests.integration.real_kai import kai_leftovers, scheduler_pods, switch_scheduler
from tests.waiting import wait_for

# The operator's Deployments, and the service (cmd/<name> in KAI's source) each one runs.
SERVICES = {
    "kai-operator": "operator",
    "kai-scheduler-default": "scheduler",
    "binder": "binder",
    "pod-grouper": "podgrouper",
    "podgroup-controller": "podgroupcontroller",
    "queue-controller": "queuecontroller",
    "admission": "admission",
}
# What the local tuning profile changes, in the order tune_kai reports them.
TUNED_DEPLOYMENTS = (
    "admission",
    "binder",
    "kai-scheduler-default",
    "pod-grouper",
    "podgroup-controller",
    "queue-controller",
)


def test_a_chart_that_does_not_install_is_an_error_naming_kai_and_its_log(
    kai: BuiltImages, local_env: LocalEnvironment, tmp_path: Path
) -> None:
    """A chart that fails to render: the error names KAI and its log, the installed release is kept."""
    deployed = _release(local_env)
    chart = tmp_path / "source" / CHART_IN_SOURCE
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: kai-scheduler\nversion: 0.0.0\n")
    (chart / "templates" / "broken.yaml").write_text("kind: [not closed\n")
    images = dataclasses.replace(local_env.built_images(), kai_source=tmp_path / "source")
    with pytest.raises(ComponentError, match=r"KAI: helm could not install the chart .*; see .*kai\.log"):
        install_kai(
            images,
            helm=local_env.config.helm_dir / "helm",
            kubeconfig=local_env.config.kubeconfig,
            kubectl=local_env.kubectl,
            logs_dir=tmp_path,
            node_selector={},
            tolerations=[],
        )
    assert "broken.yaml" in (tmp_path / "kai.log").read_text(), "helm's own error is in the log"
    assert _release(local_env) == deployed


@pytest.mark.timeout(600)  # KAI uninstalled, the failed install, KAI installed again
@pytest.mark.usefixtures("without_kai")
class TestAKaiThatDoesNotInstall:
    """Installs that fail, on a cluster without KAI (uninstalled once for both, installed again after)."""

    def test_kai_images_the_registry_does_not_have_are_an_error_naming_kai_and_its_log(
        self, local_env: LocalEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """KAI's chart at an image tag the registry does not serve: not even its hook jobs start.

        helm gives up on the hooks after the timeout (45 s here, 300 s as shipped) with an error naming
        KAI and its log, the log says why (the pods' image pulls), and uninstalling the release, whose
        post-delete hook cannot run either, leaves nothing of it behind.
        """
        monkeypatch.setattr(kai_chart, "READY_TIMEOUT_SECONDS", 45)
        images = dataclasses.replace(local_env.built_images(), kai_image_tag="never-built")
        with pytest.raises(
            ComponentError, match=r"^KAI: helm could not install the chart .*; see .*kai\.log$"
        ):
            _install(local_env, images, tmp_path)
        _check_the_pull_is_logged_and_uninstall(local_env, tmp_path / "kai.log", image=":never-built")

    def test_a_kai_that_never_becomes_ready_is_an_error_naming_kai_and_its_log(
        self, local_env: LocalEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """KAI's chart installs, but its operator's binder runs an image the registry does not have.

        KAI's chart passes ``binder.image.tag`` on to kai-config, so the operator starts a binder that
        never runs and never reports KAI available: after the timeout (60 s here, 300 s as shipped, for
        helm's hooks and again for the operator's report) the error names KAI, what the operator reports
        and the log, which shows the binder's image pull.
        """
        monkeypatch.setattr(kai_chart, "READY_TIMEOUT_SECONDS", 60)
        built = local_env.built_images()
        chart = tmp_path / "source" / CHART_IN_SOURCE
        shutil.copytree(built.kai_source / CHART_IN_SOURCE, chart)
        values = yaml.safe_load((chart / "values.yaml").read_text())
        values["binder"]["image"]["tag"] = "never-built"
        (chart / "values.yaml").write_text(yaml.safe_dump(values))
        images = dataclasses.replace(built, kai_source=tmp_path / "source")
        not_available = r"^KAI: the operator did not report KAI available within 60 s .*; see .*kai\.log$"
        with pytest.raises(ComponentError, match=not_available):
            _install(local_env, images, tmp_path)
        _check_the_pull_is_logged_and_uninstall(local_env, tmp_path / "kai.log", image="/binder:never-built")


def _check_the_pull_is_logged_and_uninstall(
    local_env: LocalEnvironment, log_path: Path, *, image: str
) -> None:
    """The log names the image the pods wait for and their failed pull; uninstalling leaves nothing."""
    log = log_path.read_text()
    assert image in log, "the log's pods name the image they wait for"
    assert "ErrImagePull" in log or "ImagePullBackOff" in log, log[-3000:]
    local_env.uninstall_kai()
    assert not kai_leftovers(local_env)


def _install(local_env: LocalEnvironment, images: BuiltImages, logs_dir: Path) -> None:
    """KAI installed as local-up installs it, from ``images``, its log in ``logs_dir``."""
    install_kai(
        images,
        helm=local_env.config.helm_dir / "helm",
        kubeconfig=local_env.config.kubeconfig,
        kubectl=local_env.kubectl,
        logs_dir=logs_dir,
        node_selector={SYSTEM_NODE_LABEL: SYSTEM_NODE_TAINT["value"]},
        tolerations=[SYSTEM_NODE_TAINT],
    )


def _release(local_env: LocalEnvironment) -> tuple[int, str]:
    """KAI's release: its revision and status."""
    status = subprocess.run(
        [
            str(local_env.config.helm_dir / "helm"),
            "status",
            RELEASE,
            f"--namespace={NAMESPACE}",
            f"--kubeconfig={local_env.config.kubeconfig}",
            "--output=json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    release = json.loads(status.stdout)
    return release["version"], release["info"]["status"]


@pytest.fixture(scope="module")
def apps(api_client: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


def test_the_operator_runs_every_service_on_the_system_node(
    kai: BuiltImages, apps: client.AppsV1Api, core: client.CoreV1Api
) -> None:
    deployments = {d.metadata.name: d for d in apps.list_namespaced_deployment(NAMESPACE).items}
    assert set(SERVICES) <= set(deployments), f"missing: {sorted(set(SERVICES) - set(deployments))}"
    for name, service in SERVICES.items():
        deployment = deployments[name]
        image = deployment.spec.template.spec.containers[0].image
        assert image == f"{kai.kai_image_repository}/{service}:{kai.kai_image_tag}"
        assert (deployment.status.available_replicas or 0) >= 1, f"{name} is not available"
    pods = core.list_namespaced_pod(NAMESPACE).items
    assert {pod.spec.node_name for pod in pods if pod.status.phase == "Running"} == {NODE_NAME}
    assert kai.kai_image_tag == kai.kai_commit[:12]


def test_images_sh_pushes_again_only_what_the_registry_no_longer_holds(
    kai: BuiltImages, local_env: LocalEnvironment, tmp_path: Path
) -> None:
    """The registry's storage outlives ``local-down``, so images.sh pushes only what it lacks.

    Another image put under the binder's tag (as a hand push would) is replaced by the binder again,
    and nothing else is pushed.
    """
    registry = local_env.registry()
    binder = f"{kai.kai_image_repository}/binder:{kai.kai_image_tag}"
    built = registry.digest(binder)
    marker = tmp_path / "not-the-binder"
    marker.write_text(f"{uuid.uuid4()}\n")
    registry.push_with_file(base=binder, reference=binder, file=marker, path_in_image="/marker")
    assert registry.digest(binder) != built
    images_sh = REPO / "localenv" / "images.sh"
    again = subprocess.run([str(images_sh), registry.address], capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr
    pushed = [line for line in again.stderr.splitlines() if line.startswith("pushed ")]
    assert pushed == [f"pushed {registry.local_reference(binder)}"], again.stderr
    assert registry.digest(binder) == built
    once_more = subprocess.run(
        [str(images_sh), registry.address], capture_output=True, text=True, check=False
    )
    assert once_more.returncode == 0, once_more.stderr
    assert "pushed " not in once_more.stderr, once_more.stderr


def test_kai_schedules_a_pod_onto_the_node(
    kai: BuiltImages, local_env: LocalEnvironment, core: client.CoreV1Api, namespace: str
) -> None:
    name = f"scheduled-by-kai-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": name, "labels": {"kai.scheduler/queue": "default-queue"}},
            "spec": {
                "schedulerName": SCHEDULER_NAME,
                "nodeSelector": {SYSTEM_NODE_LABEL: SYSTEM_NODE_TAINT["value"]},
                "tolerations": [SYSTEM_NODE_TAINT],
                "containers": [
                    {"name": "pause", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": "10m"}}}
                ],
            },
        },
    )
    try:
        pod = wait_for(
            lambda: (p := core.read_namespaced_pod(name, namespace)).status.phase == "Running" and p,
            timeout=60,
            what=f"KAI to schedule {name} and the node to run it",
        )
    except AssertionError as error:  # seen twice on a KAI just installed: say where the pod stopped
        raise AssertionError(f"{error}\n{_pod_story(local_env, namespace, name)}") from None
    assert pod.spec.node_name == NODE_NAME
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    assert "Bound" in {event.reason for event in events}, "KAI's binder binds the pod"


def _pod_story(local_env: LocalEnvironment, namespace: str, name: str) -> str:
    """The pod, its events, its namespace's PodGroups and KAI's pods, as kubectl shows them."""
    commands = {
        "pod": ("get", "pod", name, f"--namespace={namespace}", "--output=yaml"),
        "events": ("get", "events", f"--namespace={namespace}"),
        "podgroups": ("get", "podgroups", f"--namespace={namespace}", "--output=yaml"),
        "KAI's pods": ("get", "pods", f"--namespace={NAMESPACE}", "--output=wide"),
    }
    return "\n".join(
        f"--- {title}\n{local_env.kubectl(*args, check=False)}" for title, args in commands.items()
    )


def test_the_operator_stops_and_starts_the_scheduler(
    kai: BuiltImages, local_env: LocalEnvironment, core: client.CoreV1Api
) -> None:
    """What KAI's suite does between its specs: kai-config's scheduler switched off, then on."""
    try:
        switch_scheduler(local_env, core, enabled=False)
    finally:
        switch_scheduler(local_env, core, enabled=True)


@pytest.mark.usefixtures("airflow_on_local_env")
def test_the_local_tuning_profile_is_rolled_out_by_the_real_operator(
    kai: BuiltImages, apps: client.AppsV1Api, core: client.CoreV1Api, cluster: ClusterHook
) -> None:
    """tune_kai patches kai-config and the shard; KAI's operator re-renders its services with them."""
    lines = tune_kai(cluster, include_dir=REPO / "include", profile="local")
    assert lines[-1] == (
        "KAI's operator rolled tuning profile local out: "
        + ", ".join(f"{NAMESPACE}/{name}" for name in TUNED_DEPLOYMENTS)
    )

    def container(name: str) -> client.V1Container:
        return apps.read_namespaced_deployment(name, NAMESPACE).spec.template.spec.containers[0]

    scheduler = container("kai-scheduler-default")
    assert scheduler.resources.requests == {"cpu": "250m", "memory": "1Gi"}
    assert scheduler.resources.limits == {"cpu": "2", "memory": "1Gi"}
    assert "--max-consolidation-preemptees=0" in scheduler.args
    assert "--max-concurrent-reconciles=100" in container("binder").args
    assert apps.read_namespaced_deployment("admission", NAMESPACE).spec.replicas == 1
    running = scheduler_pods(core)
    assert [pod.spec.containers[0].resources.requests for pod in running] == [
        {"cpu": "250m", "memory": "1Gi"}
    ]

    generations = {
        d.metadata.name: d.metadata.generation for d in apps.list_namespaced_deployment(NAMESPACE).items
    }
    tune_kai(cluster, include_dir=REPO / "include", profile="local")
    again = {d.metadata.name: d.metadata.generation for d in apps.list_namespaced_deployment(NAMESPACE).items}
    assert again == generations, "tuning an already tuned KAI changes nothing"


def _effective_request(pod: client.V1Pod, resource: str) -> Decimal:
    """What the scheduler counts for ``pod``: its containers' sum or largest init container, plus overhead."""

    def request(container: client.V1Container) -> Decimal:
        return Decimal(parse_quantity((container.resources.requests or {}).get(resource, "0")))

    containers = sum((request(c) for c in pod.spec.containers), Decimal(0))
    init = max((request(c) for c in pod.spec.init_containers or []), default=Decimal(0))
    overhead = Decimal(parse_quantity((pod.spec.overhead or {}).get(resource, "0")))
    return max(containers, init) + overhead


@pytest.mark.usefixtures("prepared_cluster")
def test_the_system_node_has_room_for_the_largest_runner(
    kai: BuiltImages, core: client.CoreV1Api, cluster: ClusterHook
) -> None:
    """The node has room for the runner pod of every shipped scenario, which goes on it too.

    Beside what a night's setup installs there, sized by the local deployment's profiles: KAI tuned,
    KWOK, kwok-operator, the fake GPU operator and the monitoring stack. A check of the local sizes
    against this machine's 2 CPUs: on a larger machine it holds more easily.
    """
    settings = PipelineSettings.from_environment(default_include_dir=REPO / "include")
    tune_kai(cluster, include_dir=settings.include_dir, profile=settings.kai_tuning_profile)
    setup_step("install_fake_gpu_operator").run(settings=settings)
    setup_step("install_monitoring").run(settings=settings)

    def settled() -> list[client.V1Pod]:
        pods = core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={NODE_NAME},status.phase!=Succeeded,status.phase!=Failed"
        ).items
        # Pods an upgrade replaced still count until they are gone.
        return [] if any(pod.metadata.deletion_timestamp for pod in pods) else pods

    running = wait_for(settled, timeout=120, what=f"no pod terminating on {NODE_NAME}")
    runners = load_scenarios(settings.include_dir / "scenarios")
    allocatable = core.read_node(NODE_NAME).status.allocatable
    for resource in ("cpu", "memory"):
        requested = sum((_effective_request(pod, resource) for pod in running), Decimal(0))
        largest = max(Decimal(parse_quantity(s.resources.requests.get(resource, "0"))) for s in runners)
        room = Decimal(parse_quantity(allocatable[resource]))
        assert requested + largest <= room, (
            f"{NODE_NAME}: its pods request {requested} {resource}, the largest runner {largest}, "
            f"allocatable {room}"
        )
