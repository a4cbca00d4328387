"""The real node ``kai-system``: containerd + runc, a CNI bridge, kubelet and kube-proxy on this machine.

What it is and the files it starts with: ``localenv.node_config``; its cgroups: ``localenv.cgroups``.
Everything it writes lives under the environment's state directory (``<home>/node``) except what
the kubelet and the CNI plugins put at fixed paths; ``localenv.host_state`` records those and the
kernel settings before the node starts, and ``stop`` puts them back.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from localenv import cgroups, node_config, processes
from localenv.host_state import HostSnapshot, mounts_under
from localenv.node_config import (
    CGROUP_ROOT,
    COMPONENTS,
    KUBE_PROXY_HEALTHZ_PORT,
    NODE_NAME,
    SYSTEM_NODE_LABEL,
    NodeConfig,
)
from localenv.pod_network import GuardPorts


class RealNode:
    """Starts and stops the node's processes and removes every trace of them."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config

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
        if cgroups.v2_only():
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
        node_config.write_credentials(config)
        node_config.write_containerd_config(config)
        node_config.write_cni_config(config)
        self._start(
            "containerd", [str(config.bin_dir / "containerd"), f"--config={config.path('containerd.toml')}"]
        )
        processes.wait_until(
            lambda: config.path("containerd/containerd.sock").exists(),
            timeout=30,
            component="containerd",
            log_path=config.logs_dir / "containerd.log",
            what="serving its socket",
            alive=lambda: self._running("containerd"),
        )
        node_config.write_kubelet_config(config)
        cgroups.create(CGROUP_ROOT)
        self._start(
            "kubelet",
            [
                str(config.bin_dir / "kubelet"),
                f"--config={config.path('kubelet.yaml')}",
                f"--kubeconfig={config.path('kubelet.kubeconfig')}",
                f"--root-dir={config.path('kubelet')}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={config.network.gateway}",
                f"--node-labels={SYSTEM_NODE_LABEL}=system",
                # cAdvisor's own flag (deprecated, the only setting that moves it): without it cAdvisor
                # looks at containerd's default socket, sees the pods' cgroups but not which container
                # each is, and Prometheus gets no per-container CPU and memory.
                f"--containerd={config.path('containerd/containerd.sock')}",
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
        node_config.write_kube_proxy_config(config)
        self._start(
            "kube-proxy", [str(config.bin_dir / "kube-proxy"), f"--config={config.path('kube-proxy.yaml')}"]
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
        cgroups.kill_members(CGROUP_ROOT)
        _kill_processes_under(str(config.state_dir))
        processes.stop(name="containerd", run_dir=config.run_dir)
        kube_proxy = config.bin_dir / "kube-proxy"
        if kube_proxy.exists():
            subprocess.run([str(kube_proxy), "--cleanup"], capture_output=True, check=False)
        for point in mounts_under(str(config.state_dir)):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        cgroups.remove(CGROUP_ROOT)
        shutil.rmtree(config.shim_socket_dir, ignore_errors=True)
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
