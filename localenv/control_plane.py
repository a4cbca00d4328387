"""The control plane: etcd, kube-apiserver, kube-controller-manager and kube-scheduler, run by kwokctl.

kwokctl's binary runtime runs them, the binaries localenv/build.sh builds, as processes under the
state directory (``Settings.kwok_workdir``); the API server also answers the real node and its pods on
the pod bridge.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from localenv import settings
from localenv.node_config import KUBERNETES_SERVICE_IP
from localenv.processes import ComponentError
from localenv.settings import Settings

# The cluster's NodePorts: Kubernetes' default range less its top, where kwokctl's components listen.
NODE_PORT_RANGE = "30000-32699"


@dataclass(frozen=True)
class ControlPlane:
    """The kwokctl cluster of the environment described by ``config``."""

    config: Settings

    @property
    def cluster_dir(self) -> Path:
        """Kwokctl's directory of the cluster: its pki, logs, pids and configuration."""
        return self.config.kwok_workdir / "clusters" / settings.CLUSTER_NAME

    @property
    def logs_dir(self) -> Path:
        """Where kwokctl keeps the logs of the components it runs."""
        return self.cluster_dir / "logs"

    @property
    def kept_logs_dir(self) -> Path:
        """Where a failed start keeps a copy of them (kwokctl deletes its cluster's directory)."""
        return self.config.logs_dir / "cluster"

    def create(self) -> None:
        """Create and start the cluster; returns once kwokctl has waited for it (at most 90 s)."""
        config = self.config
        kwokctl_config = config.home / "kwokctl.yaml"
        gateway = str(config.pod_network.gateway)
        # Pods reach the API server through the kubernetes Service, whose address is in its certificate.
        options: dict[str, Any] = {
            "bindAddress": "127.0.0.1",
            "kubectlBinary": str(config.bin_dir / "kubectl"),
            "kubeApiserverCertSANs": [gateway, KUBERNETES_SERVICE_IP],
        }
        # One instance each, and nothing here restarts a process that exits (a real cluster's kubelet
        # restarts its static pods): without an election to lose, they outlive an API server restart
        # instead of exiting with it.
        patches: list[dict[str, Any]] = [
            {"name": name, "extraArgs": [{"key": "leader-elect", "value": "false"}]}
            for name in ("kube-controller-manager", "kube-scheduler")
        ]
        patches.append(
            {"name": "kube-apiserver", "extraArgs": _api_server_args_for_the_node(gateway, self.cluster_dir)}
        )
        kwokctl_config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
                    "kind": "KwokctlConfiguration",
                    "options": options,
                    "componentsPatches": patches,
                }
            )
        )
        binary = config.bin_dir
        argv = [
            str(binary / "kwokctl"),
            "create",
            "cluster",
            f"--name={settings.CLUSTER_NAME}",
            "--runtime=binary",
            f"--config={kwokctl_config}",
            f"--kube-apiserver-binary={binary / 'kube-apiserver'}",
            f"--kube-controller-manager-binary={binary / 'kube-controller-manager'}",
            f"--kube-scheduler-binary={binary / 'kube-scheduler'}",
            f"--kwok-controller-binary={binary / 'kwok'}",
            f"--etcd-binary={binary / 'etcd'}",
            f"--kube-apiserver-port={config.ports.kube_apiserver}",
            # Scale tests measure the scheduler, not client-side rate limiters (default QPS 50).
            "--disable-qps-limits",
            f"--kubeconfig={config.kubeconfig}",
            "--wait=90s",
            # As on a real cluster, KWOK and the monitoring stack are missing until the pipeline's
            # setup installs them, as pods on the node.
            "--disable=kwok-controller",
        ]
        log_path = config.logs_dir / "kwokctl.log"
        env = {
            **_without_kubeconfig(os.environ),
            "KWOK_WORKDIR": str(config.kwok_workdir),
            "PATH": f"{binary}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        with log_path.open("ab") as log:
            result = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, check=False)
        if result.returncode != 0:
            raise ComponentError(
                f"kwokctl could not create the cluster (exit {result.returncode}); see {log_path} "
                f"and the component logs under {self.kept_logs_dir}"
            )

    def keep_logs(self) -> None:
        """Copy the components' logs to ``kept_logs_dir``: ``delete`` removes them with the cluster."""
        if self.logs_dir.exists():
            shutil.copytree(self.logs_dir, self.kept_logs_dir, dirs_exist_ok=True)

    def delete(self) -> None:
        """Stop the components and remove the cluster's directory (kwokctl's ``delete cluster``)."""
        config = self.config
        kwokctl = config.bin_dir / "kwokctl"
        if not (config.kwok_workdir.exists() and kwokctl.exists()):
            return
        env = {**_without_kubeconfig(os.environ), "KWOK_WORKDIR": str(config.kwok_workdir)}
        # Named explicitly: kwokctl removes the cluster's context from this file, and every
        # environment's cluster has the same name.
        subprocess.run(
            [
                str(kwokctl),
                "delete",
                "cluster",
                f"--name={settings.CLUSTER_NAME}",
                f"--kubeconfig={config.kubeconfig}",
            ],
            env=env,
            capture_output=True,
            check=False,
        )


def _api_server_args_for_the_node(gateway: str, cluster_dir: Path) -> list[dict[str, str]]:
    """What the API server needs so that the real node's pods, and the node's kubelet, work with it."""
    pki = cluster_dir / "pki"
    args = {
        # Every address, so that pods reach it on the bridge; the guard lets only loopback and the
        # bridge in. The kubernetes Service's endpoint is the bridge address.
        "bind-address": "0.0.0.0",
        "advertise-address": gateway,
        # Logs, exec and port-forward reach the kubelet by its address, never a DNS lookup of its name.
        "kubelet-preferred-address-types": "InternalIP",
        # The kubelet authenticates the API server by the cluster's CA (no anonymous kubelet API).
        "kubelet-client-certificate": str(pki / "admin.crt"),
        "kubelet-client-key": str(pki / "admin.key"),
        # kwokctl takes its components' ports (etcd, controller manager, scheduler) downward from 32767,
        # where Kubernetes allocates dynamic NodePorts first. A NodePort on etcd's port broke the
        # API server: while the Service had no endpoints, kube-proxy rejected that port on every
        # local address, and a CRD installed then never got its connection to etcd.
        "service-node-port-range": NODE_PORT_RANGE,
    }
    return [{"key": key, "value": value} for key, value in args.items()]


def _without_kubeconfig(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment for kwokctl, without a KUBECONFIG that may belong to another environment."""
    return {name: value for name, value in environ.items() if name != "KUBECONFIG"}
