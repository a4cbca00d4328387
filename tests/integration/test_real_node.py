"""The real node ``kai-system``: kubelet, containerd, CNI bridge, kube-proxy, CoreDNS and the local registry.

Everything here runs for real on this machine: the pods are containers, the images come from the
local registry under their upstream names, and the API server reaches the kubelet for logs, exec
and port-forward.
"""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kai_scale.settings import DEFAULT_RUNNER_IMAGE
from localenv import pins
from localenv.charts import VENDOR_CHARTS, VendorChart
from localenv.environment import LocalEnvironment
from localenv.node import RealNode
from localenv.node_config import COREDNS_IMAGE, NODE_NAME, SYSTEM_NODE_LABEL, SYSTEM_NODE_TAINT
from localenv.processes import ComponentError
from tests.waiting import wait_for


def _coredns_pod(core: client.CoreV1Api) -> client.V1Pod:
    pods = core.list_namespaced_pod("kube-system", label_selector="k8s-app=kube-dns").items
    running = [pod for pod in pods if pod.status.phase == "Running"]
    assert running, f"no running CoreDNS pod: {[(pod.metadata.name, pod.status.phase) for pod in pods]}"
    return running[0]


def test_node_is_ready_as_a_dedicated_system_node(core: client.CoreV1Api) -> None:
    node = core.read_node(NODE_NAME)
    conditions = {condition.type: condition.status for condition in node.status.conditions}
    assert conditions["Ready"] == "True"
    assert node.metadata.labels[SYSTEM_NODE_LABEL] == "system"
    taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.spec.taints or []]
    assert SYSTEM_NODE_TAINT in taints
    assert node.status.node_info.kubelet_version == "v1.34.4"
    assert node.status.node_info.container_runtime_version.startswith("containerd://")
    addresses = {address.type: address.address for address in node.status.addresses}
    assert not addresses["InternalIP"].startswith("127."), "the node's address is the pod bridge's"


def test_kubelet_has_its_own_node_identity(local_env: LocalEnvironment) -> None:
    """Not the admin's credentials: a client certificate for system:node:kai-system in system:nodes."""
    kubeconfig = yaml.safe_load((local_env.config.node_dir / "kubelet.kubeconfig").read_text())
    certificate_path = kubeconfig["users"][0]["user"]["client-certificate"]
    subject = x509.load_pem_x509_certificate(Path(certificate_path).read_bytes()).subject.rfc4514_string()
    assert subject == f"CN=system:node:{NODE_NAME},O=system:nodes"


def test_cluster_dns_runs_as_a_real_pod_from_the_local_registry(
    local_env: LocalEnvironment, core: client.CoreV1Api
) -> None:
    pod = _coredns_pod(core)
    assert pod.spec.node_name == NODE_NAME
    (status,) = pod.status.container_statuses
    assert status.image == COREDNS_IMAGE, "the upstream name, served by the local registry"
    pushed = local_env.registry().digest(COREDNS_IMAGE)
    assert status.image_id == f"{COREDNS_IMAGE.rsplit(':', 1)[0]}@{pushed}", "the image the registry serves"


def test_logs_exec_and_port_forward_go_through_the_api_server(
    local_env: LocalEnvironment, core: client.CoreV1Api
) -> None:
    pod = _coredns_pod(core).metadata.name
    kubectl = [str(local_env.config.bin_dir / "kubectl"), f"--kubeconfig={local_env.config.kubeconfig}"]
    logs = local_env.kubectl("-n", "kube-system", "logs", pod)
    assert "CoreDNS-1.12.1" in logs
    # An exec whose command exits returns, with the command's output and exit code.
    version = subprocess.run(
        [*kubectl, "-n", "kube-system", "exec", pod, "--", "/coredns", "-version"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (version.returncode, "CoreDNS-1.12.1" in version.stdout) == (0, True), version.stderr
    failing = subprocess.run(
        [*kubectl, "-n", "kube-system", "exec", pod, "--", "/coredns", "-conf", "/does/not/exist"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert failing.returncode == 1, failing.stderr
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        local_port = probe.getsockname()[1]
    forwarding = [*kubectl, "-n", "kube-system", "port-forward", f"pod/{pod}", f"{local_port}:9153"]
    with subprocess.Popen(forwarding, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as forward:
        try:
            scraped = wait_for(
                lambda: _get(f"http://127.0.0.1:{local_port}/metrics"),
                timeout=30,
                what="CoreDNS metrics through port-forward",
            )
            assert "coredns_build_info" in scraped
        finally:
            forward.terminate()


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())
    except OSError:
        return None


def _chain(table: str, chain: str) -> list[str]:
    listing = ["nft", "list", "chain", "inet", table, chain]
    text = subprocess.run(listing, capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in text.splitlines()[2:-2]]


def test_the_guard_keeps_pod_traffic_on_the_bridge(local_env: LocalEnvironment) -> None:
    """Read, never tested by sending traffic out: the guard's rules, in their order.

    One inet table (IPv4 and IPv6), before every other chain of its hooks: forwarding of the pod
    subnet off the bridge is dropped; the servers on every address answer only loopback and the
    bridge; from the bridge, pods reach the API server, the kubelet (Prometheus scrapes it), the S3
    endpoint, and for the Airflow deployment its database, the registry (charts), the release
    manifests' mirror and its alerts' receivers; replies come back.
    """
    network = local_env.node().config.network
    ports = local_env.config.ports
    subnet, bridge, gateway = local_env.config.pod_subnet, network.bridge, network.gateway
    served = ", ".join(
        str(port)
        for port in sorted(
            (
                ports.kube_apiserver,
                ports.kubelet,
                ports.s3,
                ports.postgres,
                ports.registry,
                ports.mirror,
                ports.alert_mail,
                ports.alert_webhook,
            )
        )
    )
    for_pods = served
    assert _chain(network.guard_table, "forward") == [
        "type filter hook forward priority raw; policy accept;",
        f'ip saddr {subnet} oifname != "{bridge}" drop',
        f'ip daddr {subnet} iifname != "{bridge}" drop',
    ]
    assert _chain(network.guard_table, "input") == [
        "type filter hook input priority raw; policy accept;",
        'iifname "lo" accept',
        f'iifname "{bridge}" ct state established,related accept',
        f'iifname "{bridge}" tcp dport {{ {for_pods} }} accept',
        f'iifname "{bridge}" drop',
        f"ip daddr {gateway} drop",
        f"tcp dport {{ {served} }} drop",
    ]


def test_no_pod_starts_without_the_guard(local_env: LocalEnvironment, tmp_path: Path) -> None:
    """A node whose network has no guard refuses to start its container runtime (nothing is written)."""
    node = local_env.node()
    unguarded = dataclasses.replace(node.config.network, bridge="kaiunguarded0")
    config = dataclasses.replace(node.config, network=unguarded, state_dir=tmp_path / "node")
    with pytest.raises(ComponentError, match=f"guard .*{unguarded.guard_table}.* is missing"):
        RealNode(config).start(kubectl=local_env.kubectl)
    assert not (tmp_path / "node").exists()
    assert not unguarded.exists()


RUNNER_IMAGE = f"{DEFAULT_RUNNER_IMAGE}:main"
ON_THE_SYSTEM_NODE = {
    "nodeSelector": {SYSTEM_NODE_LABEL: "system"},
    "tolerations": [{**SYSTEM_NODE_TAINT, "operator": "Equal"}],
}
# In the runner image: the pod's own API client from its mounted ServiceAccount token, and cluster DNS.
IN_CLUSTER_PROBE = """
import socket, sys
from kubernetes import client, config
config.load_incluster_config()
pods = client.CoreV1Api().list_namespaced_pod(sys.argv[1]).items
print("pods:", sorted(pod.metadata.name for pod in pods))
print("kubernetes:", socket.gethostbyname("kubernetes.default.svc.cluster.local"))
print("kube-dns:", socket.gethostbyname("kube-dns.kube-system"))
"""


def _runner_pod(name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            **ON_THE_SYSTEM_NODE,
            "restartPolicy": "Never",
            "containers": [
                {"name": "runner", "image": RUNNER_IMAGE, "imagePullPolicy": "Always", "command": command}
            ],
            **spec,
        },
    }


def _wait_for_default_service_account(core: client.CoreV1Api, namespace: str) -> None:
    """A pod is refused until the namespace's default ServiceAccount exists."""

    def exists() -> bool:
        try:
            core.read_namespaced_service_account("default", namespace)
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    wait_for(exists, timeout=30, what=f"the default ServiceAccount of {namespace}")


def _finished(core: client.CoreV1Api, namespace: str, name: str) -> client.V1Pod:
    def finished() -> client.V1Pod | None:
        pod = core.read_namespaced_pod(name, namespace)
        return pod if pod.status.phase in {"Succeeded", "Failed"} else None

    return wait_for(
        finished,
        timeout=120,
        what=f"pod {name} to finish",
        interval=0.5,
    )


def test_a_runner_pod_uses_in_cluster_config_and_cluster_dns(
    api_client: client.ApiClient, core: client.CoreV1Api, namespace: str
) -> None:
    """The runner image from the local registry, as a real pod.

    It reaches the API through the kubernetes Service with the pod's own token (RBAC applies), and
    CoreDNS resolves the cluster's names.
    """
    rbac = client.RbacAuthorizationV1Api(api_client)
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
        },
    )
    _wait_for_default_service_account(core, namespace)
    probe = _runner_pod("probe", ["python3", "-c", IN_CLUSTER_PROBE, namespace])
    core.create_namespaced_pod(namespace, probe)
    pod = _finished(core, namespace, "probe")
    log = core.read_namespaced_pod_log("probe", namespace)
    assert pod.status.phase == "Succeeded", log
    assert pod.spec.node_name == NODE_NAME
    assert "pods: ['probe']" in log
    assert "kubernetes: 10.0.0.1" in log
    assert "kube-dns: 10.0.0.10" in log
    (status,) = pod.status.container_statuses
    assert status.image_id.startswith(f"{DEFAULT_RUNNER_IMAGE}@sha256:"), "pulled by digest, recorded"


def test_a_runner_pod_reports_its_termination_message_and_deadline(
    core: client.CoreV1Api, namespace: str
) -> None:
    _wait_for_default_service_account(core, namespace)
    write_and_fail = "echo 'spec failed: reclaim' > /dev/termination-log; exit 3"
    core.create_namespaced_pod(namespace, _runner_pod("fails", ["sh", "-c", write_and_fail]))
    core.create_namespaced_pod(namespace, _runner_pod("overruns", ["sleep", "600"], activeDeadlineSeconds=5))
    failed = _finished(core, namespace, "fails")
    terminated = failed.status.container_statuses[0].state.terminated
    assert (failed.status.phase, terminated.exit_code, terminated.reason) == ("Failed", 3, "Error")
    assert terminated.message.strip() == "spec failed: reclaim"
    overran = _finished(core, namespace, "overruns")
    assert (overran.status.phase, overran.status.reason) == ("Failed", "DeadlineExceeded")


def test_a_failing_runner_pod_falls_back_to_its_log_and_logs_both_streams(
    core: client.CoreV1Api, namespace: str
) -> None:
    """``FallbackToLogsOnError`` as the pipeline sets it: the log's tail is the termination message."""
    _wait_for_default_service_account(core, namespace)
    script = (
        'echo "hello from $POD_NAME with NODE_COUNT=$NODE_COUNT"; echo "spec failed: reclaim" >&2; exit 3'
    )
    pod = _runner_pod("fails", ["sh", "-c", script])
    pod["spec"]["containers"][0] |= {
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "env": [
            {"name": "NODE_COUNT", "value": "500"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
    }
    core.create_namespaced_pod(namespace, pod)
    failed = _finished(core, namespace, "fails")
    terminated = failed.status.container_statuses[0].state.terminated
    assert (failed.status.phase, terminated.exit_code, terminated.reason) == ("Failed", 3, "Error")
    assert "spec failed: reclaim" in terminated.message
    # Two pipes: their lines reach the log in either order.
    log = core.read_namespaced_pod_log("fails", namespace, _preload_content=False).data.decode()
    lines = log.splitlines()
    assert sorted(lines) == ["hello from fails with NODE_COUNT=500", "spec failed: reclaim"]


def test_a_running_pods_log_can_be_followed(core: client.CoreV1Api, namespace: str) -> None:
    _wait_for_default_service_account(core, namespace)
    script = "for i in 1 2 3; do echo tick $i; sleep 0.3; done"
    core.create_namespaced_pod(namespace, _runner_pod("ticks", ["sh", "-c", script]))
    wait_for(
        lambda: core.read_namespaced_pod("ticks", namespace).status.phase in {"Running", "Succeeded"},
        timeout=60,
        what="pod ticks to start",
    )
    response = core.read_namespaced_pod_log("ticks", namespace, follow=True, _preload_content=False)
    assert response.data.decode().splitlines() == ["tick 1", "tick 2", "tick 3"]
    assert _finished(core, namespace, "ticks").status.phase == "Succeeded"


def _processes_running(argv: list[str]) -> list[int]:
    """Processes of this machine with exactly this command line (a container's, seen from the host)."""
    wanted = "\0".join(argv) + "\0"
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_text() == wanted:
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_deleting_a_runner_pod_stops_its_container(core: client.CoreV1Api, namespace: str) -> None:
    _wait_for_default_service_account(core, namespace)
    command = ["sleep", f"{600 + uuid.uuid4().int % 1000}"]  # a command line no other process has
    core.create_namespaced_pod(namespace, _runner_pod("sleeps", command))
    wait_for(lambda: _processes_running(command), timeout=60, what="the pod's process on this machine")
    core.delete_namespaced_pod("sleeps", namespace, grace_period_seconds=2)

    def gone() -> bool:
        try:
            core.read_namespaced_pod("sleeps", namespace)
        except ApiException as error:
            return bool(error.status == 404)
        return False

    wait_for(gone, timeout=60, what="the deleted pod to disappear")
    assert _processes_running(command) == []


@pytest.mark.parametrize(
    "image",
    [
        "registry.k8s.io/pause:3.9",  # a mirrored registry: asked on loopback only
        "gcr.io/google-containers/pause:3.2",  # not mirrored: containerd's _default host, loopback too
    ],
)
def test_an_image_the_local_registry_lacks_is_never_pulled_upstream(
    core: client.CoreV1Api, namespace: str, image: str
) -> None:
    """The local registry answers "not found"; upstream, which has both images, is never asked.

    Upstream would have served the image, and from this machine it is not even reachable.
    """
    _wait_for_default_service_account(core, namespace)
    pod = _runner_pod("bad-image", ["true"])
    pod["spec"]["containers"][0]["image"] = image
    core.create_namespaced_pod(namespace, pod)

    def pull_failure() -> str | None:
        events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=bad-image").items
        return next((e.message for e in events if e.reason == "Failed" and "pull" in e.message), None)

    message = wait_for(pull_failure, timeout=60, what="the pull's failure event")
    assert message.endswith(f"failed to resolve image: {image}: not found"), message


def test_kwoks_controller_image_runs_from_the_local_registry(
    local_env: LocalEnvironment, core: client.CoreV1Api, namespace: str
) -> None:
    """The image kwok's release manifests name, built from the kwok module (for the setup's KWOK install)."""
    _wait_for_default_service_account(core, namespace)
    pod = _runner_pod("kwok-version", [])
    container = pod["spec"]["containers"][0]
    del container["command"]  # the image's entrypoint, as kwok's Deployment runs it
    container |= {"image": pins.kwok_image(), "args": ["--version"]}
    core.create_namespaced_pod(namespace, pod)
    finished = _finished(core, namespace, "kwok-version")
    log = core.read_namespaced_pod_log("kwok-version", namespace, _preload_content=False).data.decode()
    assert finished.status.phase == "Succeeded", log
    assert log.startswith(f"kwok version {pins.kwok_version()} ")
    digest = local_env.registry().digest(pins.kwok_image())
    assert finished.status.container_statuses[0].image_id.endswith(f"@{digest}")


@pytest.mark.parametrize("chart", VENDOR_CHARTS, ids=lambda chart: chart.name)
def test_the_registry_serves_the_installs_charts_under_their_upstream_names(
    local_env: LocalEnvironment, chart: VendorChart
) -> None:
    """Packaged from the source snapshots, dependencies included: helm renders them from the registry."""
    helm = str(local_env.config.helm_dir / "helm")
    url = f"oci://{local_env.registry().address}/{chart.reference}"
    pulled = [url, "--version", chart.version, "--plain-http"]
    shown = subprocess.run([helm, "show", "chart", *pulled], capture_output=True, text=True, check=False)
    assert shown.returncode == 0, shown.stderr
    metadata = yaml.safe_load(shown.stdout)
    assert (metadata["name"], metadata["version"]) == (chart.name, chart.version)
    rendered = subprocess.run(
        [helm, "template", "probe", *pulled], capture_output=True, text=True, check=False
    )
    assert rendered.returncode == 0, rendered.stderr
    kinds = {doc["kind"] for doc in yaml.safe_load_all(rendered.stdout) if doc}
    assert "DaemonSet" in kinds or "Deployment" in kinds
    if chart.name == "kube-prometheus-stack":
        assert "grafana-8.5.1" in rendered.stdout, "its dependencies came along"


def test_no_node_port_can_take_a_port_of_the_control_plane(
    local_env: LocalEnvironment, core: client.CoreV1Api, namespace: str
) -> None:
    """No NodePort may take the port of a control-plane component (etcd's above all).

    kwokctl's components listen at the top of Kubernetes' default NodePort range, where dynamic
    NodePorts are allocated first; kube-proxy rejects a NodePort without endpoints on every local
    address, so such a NodePort on etcd's port would cut the API server off from etcd.
    """
    (kwokctl,) = [
        doc
        for doc in yaml.safe_load_all((local_env.cluster_dir() / "kwok.yaml").read_text())
        if doc and doc.get("kind") == "KwokctlConfiguration"
    ]
    ports = {
        name: port
        for name, port in kwokctl["options"].items()
        if name.endswith("Port") and type(port) is int and port  # not securePort: true
    }
    assert {"etcdPort", "etcdPeerPort", "kubeControllerManagerPort", "kubeSchedulerPort"} <= set(ports)
    for name, port in ports.items():
        service = {
            "metadata": {"name": f"on-{name.lower()}"},
            "spec": {
                "type": "NodePort",
                "ports": [{"port": 80, "nodePort": port}],
                "selector": {"app": "none"},
            },
        }
        # Created for real: a server-side dry run allocates no NodePort and so checks no range.
        with pytest.raises(ApiException, match="provided port is not in the valid range"):
            core.create_namespaced_service(namespace, service)
