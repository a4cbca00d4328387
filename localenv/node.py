"""The real node ``kai-system``: containerd + runc, a CNI bridge, kubelet and kube-proxy on this machine.

Everything it writes lives under the environment's state directory (``<home>/node``) except what
the kubelet and the CNI plugins put at fixed paths; ``localenv.host_state`` records those and the
kernel settings before the node starts, and ``stop`` puts them back.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
import warnings
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.utils import CryptographyDeprecationWarning
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kai_scale_model.waiting import Deadline
from localenv import pins, processes
from localenv.host_state import HostSnapshot, mounts_under
from localenv.pod_network import GuardPorts, PodNetwork

NODE_NAME = "kai-system"
# A dedicated system node: only pods that tolerate the taint run here (KWOK nodes carry their own).
SYSTEM_NODE_LABEL = "kai-scale.dev/node-role"
SYSTEM_NODE_TAINT = {"key": SYSTEM_NODE_LABEL, "value": "system", "effect": "NoSchedule"}
# The kubernetes Service's address: the API server's default service CIDR is 10.0.0.0/24.
KUBERNETES_SERVICE_IP = "10.0.0.1"
CLUSTER_DNS_IP = "10.0.0.10"
CLUSTER_DOMAIN = "cluster.local"
# The sandbox image of Kubernetes 1.34 (build/pause); served by the local registry like every other image.
PAUSE_IMAGE = f"registry.k8s.io/pause:{pins.PAUSE_VERSION}"
# The cluster DNS of localenv/manifests/coredns.yaml.
COREDNS_IMAGE = f"registry.k8s.io/coredns/coredns:{pins.COREDNS_VERSION}"
# Upstream registries whose images the node pulls from the local registry, under <registry>/<upstream>/.
MIRRORED_REGISTRIES = ("registry.k8s.io", "ghcr.io", "quay.io", "docker.io", "nvcr.io", "gcr.io")
# Cgroup parent of every pod (cgroupfs driver, cgroups v1): one tree to remove on stop.
CGROUP_ROOT = "kai-scale"
COMPONENTS = ("containerd", "kubelet", "kube-proxy")
KUBE_PROXY_HEALTHZ_PORT = 10256


@dataclass(frozen=True)
class NodeConfig:
    """Where the node keeps its state, the binaries it runs, and the cluster it joins."""

    state_dir: Path
    bin_dir: Path
    logs_dir: Path
    run_dir: Path
    network: PodNetwork
    pki_dir: Path
    """The cluster's CA (``ca.crt``, ``ca.key``), made by kwokctl."""
    api_server_port: int
    kubelet_port: int
    pod_served_ports: tuple[int, ...]
    """This machine's servers that pods use besides the API server (the S3 endpoint)."""
    registry: str
    """host:port of the local registry on loopback."""


class RealNode:
    """Starts and stops the node's processes and removes every trace of them."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config

    @property
    def shim_socket_dir(self) -> Path:
        """The shim sockets of containerd: outside the state directory, whose path may be too long."""
        digest = hashlib.sha256(str(self.config.state_dir).encode()).hexdigest()[:8]
        return Path("/run") / f"kai-scale-{digest}"

    @property
    def snapshot_path(self) -> Path:
        """The machine as it was before the node, saved by ``prepare_host``."""
        return self.config.state_dir / "host-before.json"

    # ---- start ---------------------------------------------------------------------------------------
    def prepare_host(self) -> None:
        """Snapshot the machine, then the guard and the bridge: before the API server binds every address.

        One node per machine: a bridge of the same name without this environment's snapshot belongs to
        another environment's node.
        """
        config = self.config
        if _cgroup_v2_only():
            raise processes.ComponentError(
                "the real node needs cgroups v1 (or a hybrid v1/v2 machine): this one has cgroup2 only"
            )
        if config.network.exists() and not self.snapshot_path.exists():
            raise processes.ComponentError(
                f"bridge {config.network.bridge} exists but is not this environment's: another local "
                "environment's node runs on this machine (one per machine); stop it with its "
                "`make local-down`"
            )
        config.state_dir.mkdir(parents=True, exist_ok=True)
        if not self.snapshot_path.exists():
            HostSnapshot.take().save(self.snapshot_path)
        # Always (again): a guard removed by hand must not leave a restarted API server unguarded.
        ports = GuardPorts(
            served=(config.api_server_port, config.kubelet_port, *config.pod_served_ports),
            # The kubelet too: Prometheus scrapes it (its cAdvisor has the containers' CPU and memory).
            for_pods=(config.api_server_port, config.kubelet_port, *config.pod_served_ports),
        )
        if config.network.exists():
            config.network.install_guard(ports)
        else:
            config.network.create(ports)

    def start(self, *, kubectl: Callable[..., str]) -> None:
        """containerd, then the kubelet (Ready node), then kube-proxy; never without the guard."""
        config = self.config
        if not config.network.guard_installed():
            raise processes.ComponentError(
                f"the pod network's guard (nftables table inet {config.network.guard_table}) is missing: "
                "no pod starts without it; run `make local-down` and `make local-up`"
            )
        self._write_credentials()
        self._write_containerd_config()
        self._write_cni_config()
        self._start(
            "containerd", [str(config.bin_dir / "containerd"), f"--config={self._path('containerd.toml')}"]
        )
        processes.wait_until(
            lambda: self._path("containerd/containerd.sock").exists(),
            timeout=30,
            component="containerd",
            log_path=config.logs_dir / "containerd.log",
            what="serving its socket",
            alive=lambda: self._running("containerd"),
        )
        self._write_kubelet_config()
        _create_cgroups(CGROUP_ROOT)
        self._start(
            "kubelet",
            [
                str(config.bin_dir / "kubelet"),
                f"--config={self._path('kubelet.yaml')}",
                f"--kubeconfig={self._path('kubelet.kubeconfig')}",
                f"--root-dir={self._path('kubelet')}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={config.network.gateway}",
                f"--node-labels={SYSTEM_NODE_LABEL}=system",
                # cAdvisor's own flag (deprecated, the only setting that moves it): without it cAdvisor
                # looks at containerd's default socket, sees the pods' cgroups but not which container
                # each is, and Prometheus gets no per-container CPU and memory.
                f"--containerd={self._path('containerd/containerd.sock')}",
            ],
        )
        processes.wait_until(
            lambda: _node_ready(kubectl),
            timeout=90,
            component="kubelet",
            log_path=config.logs_dir / "kubelet.log",
            what=f"registered a Ready node {NODE_NAME}",
            alive=lambda: self._running("kubelet"),
        )
        self._write_kube_proxy_config()
        self._start(
            "kube-proxy", [str(config.bin_dir / "kube-proxy"), f"--config={self._path('kube-proxy.yaml')}"]
        )
        processes.wait_until(
            _kube_proxy_healthy,
            timeout=60,
            component="kube-proxy",
            log_path=config.logs_dir / "kube-proxy.log",
            what="syncing its rules",
            alive=lambda: self._running("kube-proxy"),
        )

    def running(self) -> dict[str, bool]:
        """Each of the node's processes and whether it runs."""
        return {name: self._running(name) for name in COMPONENTS}

    def _running(self, name: str) -> bool:
        return processes.running_pid(name=name, run_dir=self.config.run_dir) is not None

    def _start(self, name: str, argv: list[str]) -> None:
        processes.start(
            name=name,
            argv=argv,
            log_dir=self.config.logs_dir,
            run_dir=self.config.run_dir,
            # containerd finds its shim and runc on PATH; the CNI plugins are given by path.
            env={**os.environ, "PATH": f"{self.config.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
        )

    def _path(self, relative: str) -> Path:
        return self.config.state_dir / relative

    # ---- configuration files -------------------------------------------------------------------------
    def _write_credentials(self) -> None:
        """Client certificates signed by the cluster's CA: the node's own identity and kube-proxy's."""
        with warnings.catch_warnings():
            # kwokctl's CA has a negative serial number; cryptography still loads it, with a warning.
            warnings.simplefilter("ignore", CryptographyDeprecationWarning)
            ca_cert = x509.load_pem_x509_certificate((self.config.pki_dir / "ca.crt").read_bytes())
        ca_key = serialization.load_pem_private_key(
            (self.config.pki_dir / "ca.key").read_bytes(), password=None
        )
        for name, common_name, organization in (
            ("kubelet", f"system:node:{NODE_NAME}", "system:nodes"),
            ("kube-proxy", "system:kube-proxy", None),
        ):
            key = ec.generate_private_key(ec.SECP256R1())
            subject = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
            if organization:
                subject.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
            now = datetime.datetime.now(datetime.UTC)
            certificate = (
                x509.CertificateBuilder()
                .subject_name(x509.Name(subject))
                .issuer_name(ca_cert.subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=365))
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
            )
            cert_path, key_path = self._path(f"pki/{name}.crt"), self._path(f"pki/{name}.key")
            cert_path.parent.mkdir(parents=True, exist_ok=True)
            cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
            key_path.write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.TraditionalOpenSSL,
                    serialization.NoEncryption(),
                )
            )
            key_path.chmod(0o600)
            self._write_yaml(f"{name}.kubeconfig", self._kubeconfig(name, cert_path, key_path))

    def _kubeconfig(self, user: str, cert: Path, key: Path) -> dict[str, object]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": f"https://127.0.0.1:{self.config.api_server_port}",
                        "certificate-authority": str(self.config.pki_dir / "ca.crt"),
                    },
                }
            ],
            "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
            "current-context": "local",
        }

    def _write_containerd_config(self) -> None:
        certs_dir = self._path("containerd/certs.d")
        for upstream in MIRRORED_REGISTRIES:
            # The local registry replaces the upstream: nothing is fetched from it, even on a miss.
            _write(
                certs_dir / upstream / "hosts.toml",
                f'server = "http://{self.config.registry}/v2/{upstream}"\noverride_path = true\n',
            )
        # Any other registry fails here, on loopback, instead of leaving the machine.
        _write(
            certs_dir / "_default" / "hosts.toml",
            f'server = "http://{self.config.registry}/v2/not-mirrored"\noverride_path = true\n',
        )
        root = self._path("containerd")
        _write(
            self._path("containerd.toml"),
            f"""version = 4
root = "{root}/root"
state = "{root}/state"
# Plugins that would write under /opt and /var/run; nothing here uses them.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri"]

[plugins.'io.containerd.server.v1.grpc']
  address = "{root}/containerd.sock"
[plugins.'io.containerd.server.v1.ttrpc']
  address = "{root}/containerd.sock.ttrpc"
[plugins.'io.containerd.shim.v1.manager']
  # The shims' sockets, otherwise under /run/containerd (a short path: at most 42 characters).
  socket_dir = "{self.shim_socket_dir}"

[plugins.'io.containerd.cri.v1.images']
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{PAUSE_IMAGE}"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "{certs_dir}"

[plugins.'io.containerd.cri.v1.runtime']
  # Root here lacks CAP_SYS_RESOURCE: a negative oom_score_adj (the kubelet asks -998 for sandboxes)
  # fails every sandbox; clamp to containerd's own.
  restrict_oom_score_adj = true
  # Network namespaces of pods under the state directory instead of /run/netns.
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{self.config.bin_dir / "cni"}"]
    conf_dir = "{self._path("cni/net.d")}"
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = "{self.config.bin_dir / "runc"}"
      # runc's state, otherwise under /run/containerd.
      Root = "{root}/runc"
      SystemdCgroup = false

[plugins.'io.containerd.grpc.v1.cri']
  # The streaming server of exec, attach and port-forward, for the kubelet only.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
""",
        )

    def _write_cni_config(self) -> None:
        network = self.config.network
        self._write_json(
            "cni/net.d/10-kai-scale.conflist",
            {
                "cniVersion": "1.0.0",
                "name": "kai-scale",
                "plugins": [
                    {
                        "type": "bridge",
                        "bridge": network.bridge,
                        "isGateway": True,
                        # Nothing leaves the machine, so nothing is masqueraded.
                        "ipMasq": False,
                        "hairpinMode": True,
                        "ipam": {
                            "type": "host-local",
                            "ranges": [[{"subnet": str(network.subnet), "gateway": str(network.gateway)}]],
                            "routes": [{"dst": "0.0.0.0/0"}],
                            "dataDir": str(self._path("cni/ipam")),
                        },
                    },
                    {"type": "portmap", "capabilities": {"portMappings": True}},
                ],
            },
        )

    def _write_kubelet_config(self) -> None:
        config = self.config
        empty_resolv_conf = self._path("resolv.conf")
        # Pods with dnsPolicy Default get no off-machine resolver; cluster names go to CoreDNS.
        empty_resolv_conf.write_text("")
        self._write_yaml(
            "kubelet.yaml",
            {
                "apiVersion": "kubelet.config.k8s.io/v1beta1",
                "kind": "KubeletConfiguration",
                "address": str(config.network.gateway),
                "port": config.kubelet_port,
                "readOnlyPort": 0,
                "healthzPort": 0,
                "containerRuntimeEndpoint": f"unix://{self._path('containerd/containerd.sock')}",
                "cgroupDriver": "cgroupfs",
                "cgroupRoot": f"/{CGROUP_ROOT}",
                # The node runs on cgroups v1 (prepare_host refuses v2 alone), which 1.34 refuses
                # unless told otherwise.
                "failCgroupV1": False,
                "podLogsDir": str(self._path("pod-logs")),
                "authentication": {
                    "anonymous": {"enabled": False},
                    "webhook": {"enabled": True},
                    "x509": {"clientCAFile": str(config.pki_dir / "ca.crt")},
                },
                "authorization": {"mode": "Webhook"},
                "clusterDNS": [CLUSTER_DNS_IP],
                "clusterDomain": CLUSTER_DOMAIN,
                "resolvConf": str(empty_resolv_conf),
                "registerWithTaints": [SYSTEM_NODE_TAINT],
                "makeIPTablesUtilChains": False,
                "serializeImagePulls": False,
                # A developer's disk is fuller than a node's: evict only when it is really full.
                "evictionHard": {
                    "memory.available": "100Mi",
                    "nodefs.available": "2%",
                    "imagefs.available": "2%",
                },
                "imageGCHighThresholdPercent": 100,
                "imageGCLowThresholdPercent": 99,
            },
        )

    def _write_kube_proxy_config(self) -> None:
        network = self.config.network
        self._write_yaml(
            "kube-proxy.yaml",
            {
                "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
                "kind": "KubeProxyConfiguration",
                "clientConnection": {"kubeconfig": str(self._path("kube-proxy.kubeconfig"))},
                "hostnameOverride": NODE_NAME,
                "bindAddress": str(network.gateway),
                # Its default ports, on loopback only.
                "healthzBindAddress": f"127.0.0.1:{KUBE_PROXY_HEALTHZ_PORT}",
                "metricsBindAddress": "127.0.0.1:10249",
                "mode": "iptables",
                "clusterCIDR": str(network.subnet),
                "nodePortAddresses": [str(network.subnet)],
                # No route_localnet change: NodePorts are not served on loopback.
                "iptables": {"localhostNodePorts": False},
                # Zeros leave the conntrack sysctls as they are.
                "conntrack": {
                    "maxPerCore": 0,
                    "min": 0,
                    "tcpEstablishedTimeout": "0s",
                    "tcpCloseWaitTimeout": "0s",
                },
            },
        )

    def _write_yaml(self, relative: str, document: dict[str, object]) -> None:
        _write(self._path(relative), yaml.safe_dump(document, sort_keys=False))

    def _write_json(self, relative: str, document: dict[str, object]) -> None:
        _write(self._path(relative), json.dumps(document, indent=2))

    # ---- stop ----------------------------------------------------------------------------------------
    def stop(self) -> list[str]:
        """Stop the node and put the machine back; returns what was restored, for the log.

        The guard stays: the caller removes it once the servers it protects have stopped.
        """
        config = self.config
        for name in ("kube-proxy", "kubelet"):
            processes.stop(name=name, run_dir=config.run_dir)
        # The pods' containers and shims outlive the kubelet and containerd: the containers are found
        # by their cgroups (in their own mount namespace, nothing names the state directory), the shims
        # by their command line.
        _kill_cgroup_members(CGROUP_ROOT)
        _kill_processes_under(str(config.state_dir))
        processes.stop(name="containerd", run_dir=config.run_dir)
        kube_proxy = config.bin_dir / "kube-proxy"
        if kube_proxy.exists():
            subprocess.run([str(kube_proxy), "--cleanup"], capture_output=True, check=False)
        for point in mounts_under(str(config.state_dir)):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        _remove_cgroups(CGROUP_ROOT)
        shutil.rmtree(self.shim_socket_dir, ignore_errors=True)
        snapshot = HostSnapshot.load(self.snapshot_path)
        restored = snapshot.restore() if snapshot else []
        config.network.remove_links()
        return restored


def _node_ready(kubectl: Callable[..., str]) -> bool:
    output = kubectl(
        "get",
        "node",
        NODE_NAME,
        "-o",
        "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
        check=False,
    )
    return str(output).strip() == "True"


def _kube_proxy_healthy() -> bool:
    """Healthy once it has programmed the Services' rules."""
    try:
        url = f"http://127.0.0.1:{KUBE_PROXY_HEALTHZ_PORT}/healthz"
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _kill_processes_under(path: str) -> None:
    for pid in processes.processes_under(path):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _cgroup_v2_only() -> bool:
    """Whether /sys/fs/cgroup is the unified hierarchy alone (it then has cgroup.controllers)."""
    return Path("/sys/fs/cgroup/cgroup.controllers").exists()


def _cgroup_hierarchies() -> list[Path]:
    """The cgroups v1 hierarchies (``unified`` is the v2 one of a hybrid machine: not the kubelet's)."""
    return [
        hierarchy
        for hierarchy in Path("/sys/fs/cgroup").iterdir()
        if hierarchy.is_dir() and not hierarchy.is_symlink() and hierarchy.name != "unified"
    ]


def _create_cgroups(root: str) -> None:
    """The kubelet's cgroup root in every hierarchy: it must exist before the kubelet starts."""
    for hierarchy in _cgroup_hierarchies():
        tree = hierarchy / root
        tree.mkdir(exist_ok=True)
        if hierarchy.name == "cpuset":
            # A new cpuset has no CPUs or memory nodes until given its parent's.
            for setting in ("cpuset.cpus", "cpuset.mems"):
                (tree / setting).write_text((hierarchy / setting).read_text())


def _kill_cgroup_members(root: str) -> None:
    """SIGKILL every process in the ``<root>`` trees and wait (up to 10 s) until they are gone."""

    def members() -> set[int]:
        pids: set[int] = set()
        for hierarchy in _cgroup_hierarchies():
            # os.walk, not rglob: a pod's cgroup may vanish during the walk, which rglob raises for.
            for directory, _, files in os.walk(hierarchy / root):
                if "cgroup.procs" in files:
                    with suppress(OSError):
                        pids.update(int(line) for line in Path(directory, "cgroup.procs").read_text().split())
        return pids

    # Not wait_for: each look kills what it finds, and a process that outlives the deadline is no error.
    deadline = Deadline(seconds=10)
    while (pids := members()) and not deadline.passed():
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _remove_cgroups(root: str) -> None:
    """Every hierarchy's ``<root>`` tree, deepest first (its processes are gone).

    Also the v2 hierarchy of a hybrid machine, where runc makes one too.
    """
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        tree = hierarchy / root
        if not tree.is_dir():
            continue
        # Deepest first (bottom-up), the tree itself last.
        for directory, _, _ in os.walk(tree, topdown=False):
            with suppress(OSError):
                os.rmdir(directory)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
