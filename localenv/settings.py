"""Where the local environment keeps its state and which ports it listens on."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from localenv.pod_network import PodNetwork

CLUSTER_NAME = "kai-scale"
S3_ACCESS_KEY = "local-access-key"
S3_SECRET_KEY = "local-secret-key"
S3_REGION = "us-east-1"
DEFAULT_BUCKET = "kai-scale-results"
DEFAULT_POD_SUBNET = ipaddress.IPv4Network("10.244.0.0/24")


def _port(name: str, default: int) -> int:
    raw = os.environ.get(f"KAI_LOCALENV_{name}_PORT", str(default))
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"KAI_LOCALENV_{name}_PORT must be a TCP port number (1-65535), got {raw!r}")
    return int(raw)


@dataclass(frozen=True, kw_only=True)
class Ports:
    """Ports of the local environment's servers (loopback, or every address behind the guard).

    The defaults lie below Linux's ephemeral range (32768-60999) and Kubernetes' NodePort range
    (30000-32767): inside the former, any client connection of the machine may hold the port as its
    own end and the server then cannot bind it.
    """

    kube_apiserver: int
    """kube-apiserver (HTTPS)."""
    s3: int
    """The S3 endpoint (moto server, HTTP)."""
    kubelet: int = 10250
    """The real node's kubelet API (HTTPS), on the pod bridge's address."""
    registry: int = 25000
    """The local OCI registry (HTTP) that serves the node's images and the charts."""
    postgres: int = 25432
    """The Airflow deployment's metadata database (PostgreSQL)."""
    mirror: int = 28080
    """The release manifests' mirror over HTTP (for the deployment's worker pods)."""
    alert_mail: int = 25025
    """An alert receiver's SMTP server on the pod bridge's address: a team's mail relay stands here.

    Not the environment's: whoever wants the deployment's alerts listens there (the tests do); the
    guard lets pods reach it.
    """
    alert_webhook: int = 28025
    """An alert receiver's webhook (HTTP) on the pod bridge's address, as ``alert_mail``."""

    @classmethod
    def from_environment(cls) -> Ports:
        """Read the ports, each overridable by ``KAI_LOCALENV_<NAME>_PORT``."""
        return cls(
            kube_apiserver=_port("KUBE_APISERVER", 26443),
            s3=_port("S3", 29000),
            kubelet=_port("KUBELET", 10250),
            registry=_port("REGISTRY", 25000),
            postgres=_port("POSTGRES", 25432),
            mirror=_port("MIRROR", 28080),
            alert_mail=_port("ALERT_MAIL", 25025),
            alert_webhook=_port("ALERT_WEBHOOK", 28025),
        )

    def by_component(self) -> dict[str, int]:
        """Each port keyed by the component that listens on it, for error messages."""
        return {
            "kube-apiserver": self.kube_apiserver,
            "s3 (moto)": self.s3,
            "registry": self.registry,
            "postgres": self.postgres,
            "manifest mirror": self.mirror,
            "alert mail": self.alert_mail,
            "alert webhook": self.alert_webhook,
        }


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Paths and ports of one local environment."""

    home: Path
    """State directory: kubeconfig, logs, pid files, kwokctl's workdir. Removed by ``down``."""
    bin_dir: Path
    """Directory of the binaries built by localenv/build.sh."""
    ports: Ports
    """The servers' ports."""
    kai: bool = True
    """Install KAI, built from source, on the node (``KAI_LOCALENV_KAI``)."""
    pod_subnet: ipaddress.IPv4Network = DEFAULT_POD_SUBNET
    """The pod network the environment creates on this machine (``KAI_LOCALENV_POD_SUBNET``)."""
    pod_bridge: str = "kaiscale0"
    """The Linux bridge of the pod network."""

    @classmethod
    def from_environment(cls) -> Settings:
        """Read the settings from ``KAI_LOCALENV_HOME``, ``KAI_LOCALENV_CACHE`` and the port variables."""
        state_root = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state"))
        cache_root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        home = Path(os.environ.get("KAI_LOCALENV_HOME", state_root / "kai-scale-pipeline"))
        cache = Path(os.environ.get("KAI_LOCALENV_CACHE", cache_root / "kai-scale-pipeline"))
        subnet = os.environ.get("KAI_LOCALENV_POD_SUBNET", str(DEFAULT_POD_SUBNET))
        try:
            pod_subnet = ipaddress.IPv4Network(subnet)
        except ValueError as error:
            message = f"KAI_LOCALENV_POD_SUBNET must be an IPv4 subnet such as 10.244.0.0/24: {error}"
            raise ValueError(message) from None
        kai = os.environ.get("KAI_LOCALENV_KAI", "1")
        if kai not in {"0", "1"}:
            raise ValueError(f"KAI_LOCALENV_KAI must be 1 (the default) or 0, got {kai!r}")
        return cls(
            home=home,
            bin_dir=cache / "bin" / "current",
            ports=Ports.from_environment(),
            kai=kai == "1",
            pod_subnet=pod_subnet,
        )

    @property
    def helm_dir(self) -> Path:
        """Directory of the helm binary built by localenv/build.sh.

        Kept apart from ``bin_dir``: a worker of the local environment has no helm unless it puts this
        directory on its PATH (the charts of installs.yaml cannot be fetched here).
        """
        return self.bin_dir.parent / "helm"

    @property
    def kubeconfig(self) -> Path:
        """The kubeconfig of the local cluster (admin credentials)."""
        return self.home / "kubeconfig"

    @property
    def logs_dir(self) -> Path:
        """One log file per process that localenv starts itself."""
        return self.home / "logs"

    @property
    def mirror_dir(self) -> Path:
        """The release manifests the pipeline's setup applies, rendered from source (its source mirror)."""
        return self.home / "mirror"

    @property
    def run_dir(self) -> Path:
        """Pid files of the processes that localenv starts itself."""
        return self.home / "run"

    @property
    def kwok_workdir(self) -> Path:
        """Kwokctl's working directory (its clusters, their logs and pki)."""
        return self.home / "kwok"

    @property
    def kube_apiserver_url(self) -> str:
        """The API server's URL."""
        return f"https://127.0.0.1:{self.ports.kube_apiserver}"

    @property
    def pod_network(self) -> PodNetwork:
        """The real node's pod network."""
        return PodNetwork(bridge=self.pod_bridge, subnet=self.pod_subnet)

    @property
    def s3_host(self) -> str:
        """Where the S3 endpoint answers both this machine and the pods: the bridge's address.

        Runner pods upload to URLs presigned for this host, so it must be one they reach.
        """
        return str(self.pod_network.gateway)

    @property
    def s3_endpoint_url(self) -> str:
        """The S3 endpoint's URL."""
        return f"http://{self.s3_host}:{self.ports.s3}"

    def own_ports(self) -> dict[str, int]:
        """The ports this environment listens on, by component."""
        ports = self.ports.by_component()
        del ports["alert mail"], ports["alert webhook"]  # the alert receivers': see Ports
        return ports

    @property
    def node_dir(self) -> Path:
        """The real node's state: containerd's root, the kubelet's root directory, pod logs, CNI state."""
        return self.home / "node"

    @property
    def registry_dir(self) -> Path:
        """The local registry's storage; kept apart from ``home`` so that ``down`` keeps the images."""
        return self.bin_dir.parent.parent / "registry"
