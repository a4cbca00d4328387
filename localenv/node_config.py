"""What the real node ``kai-system`` is, and the configuration files it starts with.

Its identity in the cluster, its settings, and its files (client certificates and kubeconfigs,
containerd, the CNI bridge, the kubelet, kube-proxy), written under its state directory.
``localenv.node`` runs it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.utils import CryptographyDeprecationWarning
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from localenv import pins
from localenv.pod_network import PodNetwork

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

    @property
    def shim_socket_dir(self) -> Path:
        """The shim sockets of containerd: outside the state directory, whose path may be too long."""
        digest = hashlib.sha256(str(self.state_dir).encode()).hexdigest()[:8]
        return Path("/run") / f"kai-scale-{digest}"

    def path(self, relative: str) -> Path:
        """A path of the node's state directory."""
        return self.state_dir / relative


def write_credentials(config: NodeConfig) -> None:
    """Client certificates signed by the cluster's CA: the node's own identity and kube-proxy's."""
    with warnings.catch_warnings():
        # kwokctl's CA has a negative serial number; cryptography still loads it, with a warning.
        warnings.simplefilter("ignore", CryptographyDeprecationWarning)
        ca_cert = x509.load_pem_x509_certificate((config.pki_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((config.pki_dir / "ca.key").read_bytes(), password=None)
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
        cert_path, key_path = config.path(f"pki/{name}.crt"), config.path(f"pki/{name}.key")
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
        _write_yaml(config, f"{name}.kubeconfig", _kubeconfig(config, name, cert_path, key_path))


def _kubeconfig(config: NodeConfig, user: str, cert: Path, key: Path) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {
                    "server": f"https://127.0.0.1:{config.api_server_port}",
                    "certificate-authority": str(config.pki_dir / "ca.crt"),
                },
            }
        ],
        "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
    }


def write_containerd_config(config: NodeConfig) -> None:
    """The configuration of containerd, its pulls sent to the local registry and nowhere else."""
    certs_dir = config.path("containerd/certs.d")
    for upstream in MIRRORED_REGISTRIES:
        # The local registry replaces the upstream: nothing is fetched from it, even on a miss.
        _write(
            certs_dir / upstream / "hosts.toml",
            f'server = "http://{config.registry}/v2/{upstream}"\noverride_path = true\n',
        )
    # Any other registry fails here, on loopback, instead of leaving the machine.
    _write(
        certs_dir / "_default" / "hosts.toml",
        f'server = "http://{config.registry}/v2/not-mirrored"\noverride_path = true\n',
    )
    root = config.path("containerd")
    _write(
        config.path("containerd.toml"),
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
  socket_dir = "{config.shim_socket_dir}"

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
bin_dirs = ["{config.bin_dir / "cni"}"]
conf_dir = "{config.path("cni/net.d")}"
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "{config.bin_dir / "runc"}"
  # runc's state, otherwise under /run/containerd.
  Root = "{root}/runc"
  SystemdCgroup = false

[plugins.'io.containerd.grpc.v1.cri']
  # The streaming server of exec, attach and port-forward, for the kubelet only.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
""",
    )


def write_cni_config(config: NodeConfig) -> None:
    """The CNI bridge of the pod network, with host-local addresses and port mappings."""
    network = config.network
    _write_json(
        config,
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
                        "dataDir": str(config.path("cni/ipam")),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
    )


def write_kubelet_config(config: NodeConfig) -> None:
    """The kubelet's configuration: a tainted system node on cgroups v1, served on the pod bridge."""
    empty_resolv_conf = config.path("resolv.conf")
    # Pods with dnsPolicy Default get no off-machine resolver; cluster names go to CoreDNS.
    empty_resolv_conf.write_text("")
    _write_yaml(
        config,
        "kubelet.yaml",
        {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": str(config.network.gateway),
            "port": config.kubelet_port,
            "readOnlyPort": 0,
            "healthzPort": 0,
            "containerRuntimeEndpoint": f"unix://{config.path('containerd/containerd.sock')}",
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": f"/{CGROUP_ROOT}",
            # The node runs on cgroups v1 (prepare_host refuses v2 alone), which 1.34 refuses
            # unless told otherwise.
            "failCgroupV1": False,
            "podLogsDir": str(config.path("pod-logs")),
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


def write_kube_proxy_config(config: NodeConfig) -> None:
    """The configuration of kube-proxy: iptables mode, its health and metrics on loopback."""
    network = config.network
    _write_yaml(
        config,
        "kube-proxy.yaml",
        {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(config.path("kube-proxy.kubeconfig"))},
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


def _write_yaml(config: NodeConfig, relative: str, document: dict[str, object]) -> None:
    _write(config.path(relative), yaml.safe_dump(document, sort_keys=False))


def _write_json(config: NodeConfig, relative: str, document: dict[str, object]) -> None:
    _write(config.path(relative), json.dumps(document, indent=2))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
