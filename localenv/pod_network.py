"""The pod network of the real node: a Linux bridge on this machine, and the guard that keeps it there.

The CNI bridge plugin turns on IP forwarding, after which a pod's packet to an outside address would
leave through the machine's own interface. The guard is an nftables table of its own, installed
before the first pod and removed by ``down`` after every server it protects has stopped: nothing from
or to the pod network is forwarded through any interface but the bridge; the servers that listen on
every address (the API server, the kubelet, the S3 endpoint) answer only loopback and the bridge,
over IPv4 and IPv6; and from the bridge, pods reach only the ports they need (the API server, the S3
endpoint) and the replies to connections this machine opened to them.
"""

from __future__ import annotations

import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class GuardPorts:
    """The TCP ports the guard knows."""

    served: tuple[int, ...]
    """Servers listening on every address: they answer only loopback and the bridge."""
    for_pods: tuple[int, ...]
    """Of those, the ones pods may open connections to."""


@dataclass(frozen=True)
class PodNetwork:
    """The bridge, its subnet and the address the node (and the API server for pods) has on it."""

    bridge: str
    subnet: ipaddress.IPv4Network

    @property
    def guard_table(self) -> str:
        """The nftables table (family inet: IPv4 and IPv6) of this network's guard."""
        return f"{self.bridge}_guard"

    @property
    def gateway(self) -> ipaddress.IPv4Address:
        """The bridge's own address: the node's InternalIP; its kubelet and the API server answer there."""
        return next(self.subnet.hosts())

    def exists(self) -> bool:
        """Whether the bridge exists."""
        return Path(f"/sys/class/net/{self.bridge}").exists()

    def create(self, ports: GuardPorts) -> None:
        """The guard first, then the bridge with the gateway address."""
        self.install_guard(ports)
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")

    def guard_rules(self, ports: GuardPorts) -> str:
        """The guard as an nftables script (one table: created and deleted atomically)."""
        served = ", ".join(str(port) for port in sorted(ports.served))
        for_pods = ", ".join(str(port) for port in sorted(ports.for_pods))
        return f"""
table inet {self.guard_table} {{
    chain forward {{
        type filter hook forward priority -300; policy accept;
        ip saddr {self.subnet} oifname != "{self.bridge}" drop
        ip daddr {self.subnet} iifname != "{self.bridge}" drop
    }}
    chain input {{
        type filter hook input priority -300; policy accept;
        iifname "lo" accept
        iifname "{self.bridge}" ct state established,related accept
        iifname "{self.bridge}" tcp dport {{ {for_pods} }} accept
        iifname "{self.bridge}" drop
        ip daddr {self.gateway} drop
        tcp dport {{ {served} }} drop
    }}
}}
"""

    def install_guard(self, ports: GuardPorts) -> None:
        """Replace the guard table with one for this network."""
        self.remove_guard()
        subprocess.run(["nft", "-f", "-"], input=self.guard_rules(ports), text=True, check=True)

    def remove_guard(self) -> None:
        """Delete the guard table if it exists."""
        if self.guard_installed():
            deletion = ["nft", "delete", "table", "inet", self.guard_table]
            result = subprocess.run(deletion, capture_output=True, text=True, check=False)
            if result.returncode != 0 and self.guard_installed():
                raise RuntimeError(f"{' '.join(deletion)} failed: {result.stderr.strip()}")

    def guard_installed(self) -> bool:
        """Whether the guard table exists."""
        result = subprocess.run(
            ["nft", "list", "table", "inet", self.guard_table], capture_output=True, check=False
        )
        return result.returncode == 0

    def remove_links(self) -> None:
        """The pods' veth pairs, then the bridge (the guard stays: ``remove_guard``).

        A veth goes with its pod's network namespace only when the kernel gets to freeing that
        namespace, which can take a while: deleting it here leaves no link behind at once.
        """
        if self.exists():
            ports = ["ip", "-o", "link", "show", "master", self.bridge]
            listing = subprocess.run(ports, capture_output=True, text=True, check=False)
            for line in listing.stdout.splitlines():
                # Gone already when the kernel freed its pod's namespace in the meantime.
                _ip("link", "delete", line.split(":")[1].strip().split("@")[0], missing_ok=True)
            _ip("link", "delete", self.bridge, missing_ok=True)


def _ip(*args: str, missing_ok: bool = False) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if missing_ok and "Cannot find device" in result.stderr:
        return
    if result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {result.stderr.strip()}")
