"""Bring the local environment up and down, and describe it: the orchestration of its components.

The control plane (etcd, kube-apiserver, kube-controller-manager and kube-scheduler, which kwokctl
runs: localenv.control_plane), the S3 endpoint (localenv.s3), the release manifests' mirror
(localenv.manifest_mirror), the Airflow deployment's database (localenv.postgres), the registry
(localenv.registry) with the images built from source (localenv.source_images), and the node
``kai-system`` (localenv.node) on which every real pod runs (CoreDNS, the runner pods, KAI, and what
the pipeline's setup installs: KWOK's controller, kwok-operator, the fake GPU operator, the monitoring
stack). What points a shell and Airflow at it: localenv.exports.
"""

from __future__ import annotations

import os
import shutil
import signal
import string
import subprocess
import time
from contextlib import suppress
from pathlib import Path

import yaml

from kai_scale_model.node_pool import NODEPOOL_CRD
from kai_scale_model.waiting import wait_for
from localenv import kai, manifest_mirror, pins, processes
from localenv.charts import ChartPusher, vendor_dir
from localenv.control_plane import ControlPlane
from localenv.node import RealNode
from localenv.node_config import COREDNS_IMAGE, PAUSE_IMAGE, SYSTEM_NODE_LABEL, SYSTEM_NODE_TAINT, NodeConfig
from localenv.paths import REPO
from localenv.postgres import PostgresServer, data_dir_for
from localenv.processes import ComponentError
from localenv.registry import LocalRegistry, StaticImage
from localenv.s3 import S3Endpoint
from localenv.settings import Settings
from localenv.source_images import BuiltImages, SourceImages

BINARIES = (
    # kwokctl, the control plane it runs, and kubectl.
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "etcd",
    "kwokctl",
    # Made into images: KWOK's controller (by up) and the monitoring chart's Prometheus (by images.sh).
    "kwok",
    "prometheus",
    # The node, and the registry and crane that serve and pack its images.
    "kubelet",
    "kube-proxy",
    "containerd",
    "containerd-shim-runc-v2",
    "runc",
    "registry",
    "crane",
    "cni/bridge",
    "images/pause",
    "images/coredns",
)
MANIFESTS = Path(__file__).with_name("manifests")
# The same NodePool the pipeline sizes for each run.
NODEPOOL_MANIFEST = REPO / "include" / "manifests" / "managed-nodepool.yaml"
UP_TIMEOUT_SECONDS = 120


def coredns_manifest() -> str:
    """localenv/manifests/coredns.yaml with its image filled in: the pinned CoreDNS release's."""
    return string.Template((MANIFESTS / "coredns.yaml").read_text()).substitute(COREDNS_IMAGE=COREDNS_IMAGE)


class LocalEnvironment:
    """The local environment described by ``settings``."""

    def __init__(self, config: Settings) -> None:
        self.config = config

    # ---- reading the state -------------------------------------------------------------------------
    def kubectl(self, *args: str, check: bool = True, input_text: str | None = None) -> str:
        """Run the locally built kubectl against the local cluster and return its output."""
        result = subprocess.run(
            [str(self.config.bin_dir / "kubectl"), f"--kubeconfig={self.config.kubeconfig}", *args],
            capture_output=True,
            text=True,
            input=input_text,
            check=False,
        )
        if check and result.returncode != 0:
            raise ComponentError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def api_ready(self) -> bool:
        """Whether the API server answers /readyz."""
        if not self.config.kubeconfig.exists():
            return False
        try:
            return self.kubectl("get", "--raw", "/readyz", check=False).strip() == "ok"
        except OSError:
            return False

    def component_states(self) -> dict[str, bool]:
        """Each component and whether it is running."""
        states = {
            "kube-apiserver": self.api_ready(),
            "s3": self.s3().running(),
            "mirror": self.mirror_server().running(),
            "postgres": self.postgres().running(),
        }
        states["pod network guard"] = self.config.pod_network.guard_installed()
        states["registry"] = self.registry().running()
        states.update(self.node().running())
        return states

    def control_plane(self) -> ControlPlane:
        """The control plane of this environment, which kwokctl runs."""
        return ControlPlane(self.config)

    def cluster_dir(self) -> Path:
        """Kwokctl's directory of the cluster: its pki, logs, pids and configuration."""
        return self.control_plane().cluster_dir

    def node(self) -> RealNode:
        """The real node ``kai-system`` of this environment."""
        config = self.config
        return RealNode(
            NodeConfig(
                state_dir=config.node_dir,
                bin_dir=config.bin_dir,
                logs_dir=config.logs_dir,
                run_dir=config.run_dir,
                network=config.pod_network,
                pki_dir=self.control_plane().cluster_dir / "pki",
                api_server_port=config.ports.kube_apiserver,
                kubelet_port=config.ports.kubelet,
                # What pods reach on this machine: S3, and for the Airflow deployment its database,
                # the charts (helm in a worker pod), the release manifests' mirror and the receivers
                # of its alerts.
                pod_served_ports=(
                    config.ports.s3,
                    config.ports.postgres,
                    config.ports.registry,
                    config.ports.mirror,
                    config.ports.alert_mail,
                    config.ports.alert_webhook,
                ),
                registry=f"127.0.0.1:{config.ports.registry}",
            )
        )

    def registry(self) -> LocalRegistry:
        """The local registry that serves the node's images."""
        config = self.config
        return LocalRegistry(
            bin_dir=config.bin_dir,
            storage=config.registry_dir,
            port=config.ports.registry,
            logs_dir=config.logs_dir,
            run_dir=config.run_dir,
        )

    def postgres(self) -> PostgresServer:
        """The Airflow deployment's metadata database."""
        config = self.config
        return PostgresServer(
            data_dir=data_dir_for(config.home),
            port=config.ports.postgres,
            pod_subnet=config.pod_subnet,
            logs_dir=config.logs_dir,
            run_dir=config.run_dir,
        )

    def s3(self) -> S3Endpoint:
        """The S3 endpoint the pipeline publishes to."""
        config = self.config
        return S3Endpoint(
            port=config.ports.s3,
            endpoint_url=config.s3_endpoint_url,
            logs_dir=config.logs_dir,
            run_dir=config.run_dir,
        )

    def mirror_server(self) -> manifest_mirror.MirrorServer:
        """The release manifests' mirror over HTTP."""
        config = self.config
        return manifest_mirror.MirrorServer(
            directory=config.mirror_dir,
            port=config.ports.mirror,
            logs_dir=config.logs_dir,
            run_dir=config.run_dir,
        )

    def is_up(self) -> bool:
        """Whether every component runs."""
        return all(self.component_states().values())

    # ---- up ------------------------------------------------------------------------------------------
    def up(self, *, node_count: int) -> None:
        """Start everything (a no-op when it all runs); on failure stop what was started."""
        if node_count < 0:
            raise ValueError(f"node count must be >= 0, got {node_count}")
        self._check_binaries()
        up = self.is_up()
        if node_count and not up:
            # Checked before anything starts: the pool needs kwok-operator, which a run's setup installs.
            raise ComponentError(
                "--nodes needs a running environment on which a run's setup installed kwok-operator: "
                "start it with `make local-up`, run `make demo`, then scale the pool"
            )
        if up:
            manifest_mirror.write_releases(mirror=self.config.mirror_dir, kubectl=self.kubectl)
            # The sources may have changed since it started: images.sh rebuilds only what did.
            self._install_from_source(self.registry())
            if node_count:
                self.scale_node_pool(node_count)
            print(f"local environment already running (state in {self.config.home})")
            return
        if self.config.home.exists():
            print("found a partly running local environment; stopping it before starting again")
            self.down()
        self._check_ports()
        try:
            self._start(node_count=node_count)
        except BaseException:
            self.down(keep_logs=True)
            raise

    def _check_binaries(self) -> None:
        missing = [name for name in BINARIES if not os.access(self.config.bin_dir / name, os.X_OK)]
        if missing:
            raise ComponentError(
                f"missing binaries in {self.config.bin_dir}: {', '.join(missing)}; "
                "build them with `make local-deps` (localenv/build.sh)"
            )

    def _check_ports(self) -> None:
        busy = [
            f"{name} port {port}"
            for name, port in self.config.own_ports().items()
            if processes.port_in_use(port)
        ]
        if busy:
            raise ComponentError(
                f"ports already in use: {', '.join(busy)}; stop what listens there or choose other ports "
                "with KAI_LOCALENV_<COMPONENT>_PORT (see localenv/settings.py)"
            )

    def _start(self, *, node_count: int) -> None:
        started = time.monotonic()
        config = self.config
        for directory in (config.logs_dir, config.run_dir, config.kwok_workdir):
            directory.mkdir(parents=True, exist_ok=True)
        # Before the API server binds every address and before any pod: the guard, then the bridge.
        self.node().prepare_host()
        # They start while the cluster does.
        self.mirror_server().start()
        self.postgres().start()
        self.s3().start()
        self.control_plane().create()
        self.s3().wait_until_listening()
        manifest_mirror.write_releases(mirror=self.config.mirror_dir, kubectl=self.kubectl)
        self._start_node()
        self.s3().create_pipeline_bucket()
        if node_count:
            self.scale_node_pool(node_count)
        print(f"local environment up in {time.monotonic() - started:.1f} s (state in {config.home})")

    def _start_node(self) -> None:
        """The registry with the node's images and the charts, the node, the cluster DNS and KAI on it."""
        registry = self.registry()
        registry.start()
        images = self.config.bin_dir / "images"
        for image in (
            StaticImage(reference=PAUSE_IMAGE, binary=images / "pause", path_in_image="/pause"),
            StaticImage(reference=COREDNS_IMAGE, binary=images / "coredns", path_in_image="/coredns"),
            StaticImage(
                reference=pins.kwok_image(),
                binary=self.config.bin_dir / "kwok",
                path_in_image="/usr/local/bin/kwok",
            ),
        ):
            registry.push_static_image(image)
        ChartPusher(
            helm=self.config.helm_dir / "helm",
            registry=registry.address,
            vendor=vendor_dir(),
            mirror=self.config.mirror_dir,
            log_path=self.config.logs_dir / "charts.log",
        ).push_all()
        self.node().start(kubectl=self.kubectl)
        self.kubectl("apply", "-f", "-", input_text=coredns_manifest())
        # CoreDNS starts while images.sh runs; as the node's first pod, it is awaited before KAI's.
        self.images().build_and_push(registry.address)
        self.kubectl("-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=90s")
        if self.config.kai:
            self.install_kai()

    def _install_from_source(self, registry: LocalRegistry) -> None:
        """The runner's and KAI's images built from source and pushed; KAI installed if configured."""
        self.images().build_and_push(registry.address)
        if self.config.kai:
            self.install_kai()

    def install_kai(self) -> None:
        """KAI from the chart of the source its images were built from (a no-op when installed so)."""
        kai.install(
            self.built_images(),
            helm=self.config.helm_dir / "helm",
            kubeconfig=self.config.kubeconfig,
            kubectl=self.kubectl,
            logs_dir=self.config.logs_dir,
            node_selector={SYSTEM_NODE_LABEL: SYSTEM_NODE_TAINT["value"]},
            tolerations=[SYSTEM_NODE_TAINT],
        )

    def uninstall_kai(self) -> None:
        """Remove KAI and everything it added to the cluster, its CRDs included."""
        kai.uninstall(
            self.built_images(),
            helm=self.config.helm_dir / "helm",
            kubeconfig=self.config.kubeconfig,
            kubectl=self.kubectl,
        )

    def images(self) -> SourceImages:
        """The images built from source, and the record of what images.sh last pushed here."""
        return SourceImages(record=self.config.home / "images.env", logs_dir=self.config.logs_dir)

    def built_images(self) -> BuiltImages:
        """What localenv/images.sh last pushed for this environment."""
        return self.images().built()

    def scale_node_pool(self, node_count: int) -> None:
        """Apply managed-nodepool at ``node_count``: kwok-operator, which the setup installs, makes them."""
        if not self.kubectl("get", "crd", NODEPOOL_CRD, "--ignore-not-found", "--output=name").strip():
            raise ComponentError(
                f"no {NODEPOOL_CRD} here: kwok-operator is installed by the pipeline's setup (a run's "
                "size_node_pool, e.g. make demo); scale the pool after it"
            )
        pool = yaml.safe_load(NODEPOOL_MANIFEST.read_text())
        pool["spec"]["nodeCount"] = node_count
        self.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(pool))

    # ---- down ----------------------------------------------------------------------------------------
    def down(self, *, keep_logs: bool = False) -> None:
        """Stop everything and remove the state directory; leaves no process, port or file behind.

        ``keep_logs`` (after a failed start) keeps the logs, kwokctl's included, that the error names.
        """
        config = self.config
        if keep_logs:
            self.control_plane().keep_logs()
        self.mirror_server().stop()
        self.s3().stop()
        # Its data directory is outside the state directory (PostgreSQL's user cannot enter root's home).
        self.postgres().remove()
        # What up did: the node's preparation saves its snapshot before it changes the machine. Without
        # it, a bridge or guard of the same name is another environment's (one node per machine), and
        # stopping the node would take that one's pods, rules, bridge and guard.
        had_node = self.node().snapshot_path.exists()
        if had_node:
            for change in self.node().stop():
                print(f"restored: {change}")
            self.registry().stop()
        self.control_plane().delete()
        # Anything still running from the state directory (a crashed start).
        for pid in processes.processes_under(str(config.home)):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if had_node:
            # Last: the API server and the S3 endpoint listen on every address until they stop.
            config.pod_network.remove_guard()
        _remove_state(config.home, keep=config.logs_dir if keep_logs else None)

        def busy_ports() -> list[str]:
            ports = config.own_ports().items()
            return [f"{name} ({port})" for name, port in ports if processes.port_in_use(port)]

        # A killed process releases its sockets a moment after the signal.
        wait_for(
            busy_ports,
            until=lambda busy: not busy,
            what="the ports released",
            timeout=15,
            interval=0.2,
            error=lambda busy: ComponentError(
                f"after stopping, these ports are still in use: {', '.join(busy)}"
            ),
        )


def _remove_state(home: Path, *, keep: Path | None) -> None:
    """Remove the state directory, or all of it but ``keep``."""
    if keep is None or not home.exists():
        shutil.rmtree(home, ignore_errors=True)
        return
    for entry in home.iterdir():
        if entry == keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink()
