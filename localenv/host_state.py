"""What the real node changes on the machine, recorded before it starts and put back by ``down``.

The kubelet tunes kernel settings, the CNI bridge plugin turns on IP forwarding, and kubelet and
kube-proxy add nftables tables and chains and create directories at fixed paths. A snapshot taken
before the first of them starts says what to restore and what to remove, so ``make local-down``
leaves the machine as ``make local-up`` found it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Every kernel setting the kubelet or the CNI plugins change here.
SYSCTLS = (
    "net/ipv4/ip_forward",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
# Fixed paths the kubelet, containerd or the CNI plugins create (they have no setting to move them).
FIXED_PATHS = (
    "/var/lib/kubelet",
    "/run/containerd",
    "/opt/containerd",
    "/var/run/nri",
    "/var/log/containers",
    "/var/log/pods",
    "/var/lib/cni",
    "/run/netns",
    # buildah (localenv/images.sh) keeps its blob cache and CNI directory there.
    "/var/lib/containers",
    "/etc/cni",
)
# What kube-proxy and the kubelet add to nftables (through iptables-nft): these tables, and chains
# with these prefixes in tables that were already there. Nothing else is touched.
NODE_NFT_TABLES = {"filter", "nat", "mangle"}
NODE_NFT_CHAIN_PREFIXES = ("KUBE-", "CNI-")


@dataclass(frozen=True)
class HostSnapshot:
    """The machine before the node: kernel settings, nftables tables and chains, fixed paths."""

    sysctls: dict[str, str]
    nft_chains: dict[str, list[str]]
    """Chains of each table, keyed ``<family> <table>``."""
    nft_ruleset: str
    """Every table, chain and rule, without handles and counters (what ``down`` must give back)."""
    existing_paths: list[str]

    @classmethod
    def take(cls) -> HostSnapshot:
        """The machine as it is now."""
        return cls(
            sysctls={name: _sysctl_path(name).read_text().strip() for name in SYSCTLS},
            nft_chains=nft_chains(),
            nft_ruleset=nft_ruleset(),
            existing_paths=[path for path in FIXED_PATHS if Path(path).exists()],
        )

    def save(self, path: Path) -> None:
        """Write the snapshot as JSON."""
        path.write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, path: Path) -> HostSnapshot | None:
        """The snapshot saved at ``path``, or None when none was taken."""
        if not path.exists():
            return None
        raw: dict[str, Any] = json.loads(path.read_text())
        return cls(
            sysctls=dict(raw["sysctls"]),
            nft_chains={table: list(chains) for table, chains in raw["nft_chains"].items()},
            # Absent from a snapshot an older localenv saved: down must still restore that machine.
            nft_ruleset=str(raw.get("nft_ruleset", "")),
            existing_paths=list(raw["existing_paths"]),
        )

    def restore(self) -> list[str]:
        """Put the machine back; returns what was changed, for the log."""
        restored = []
        for name, value in self.sysctls.items():
            path = _sysctl_path(name)
            if path.read_text().strip() != value:
                path.write_text(value)
                restored.append(f"sysctl {name.replace('/', '.')}={value}")
        restored.extend(self._remove_new_nft_objects())
        for fixed_path in FIXED_PATHS:
            if fixed_path not in self.existing_paths and Path(fixed_path).exists():
                _unmount_under(fixed_path)
                shutil.rmtree(fixed_path, ignore_errors=True)
                restored.append(f"removed {fixed_path}")
        return restored

    def _remove_new_nft_objects(self) -> list[str]:
        removed = []
        for table, chains in nft_chains().items():
            family, name = table.split(" ", 1)
            if table not in self.nft_chains:
                if name in NODE_NFT_TABLES:
                    _nft("delete", "table", family, name)
                    removed.append(f"nftables table {table}")
                continue
            new = [
                chain
                for chain in chains
                if chain not in self.nft_chains[table] and chain.startswith(NODE_NFT_CHAIN_PREFIXES)
            ]
            # Rules of old chains that jump to a new one go first, then the new chains.
            for chain in self.nft_chains[table]:
                for handle in _rules_jumping_to(family, name, chain, set(new)):
                    _nft("delete", "rule", family, name, chain, "handle", str(handle))
            for chain in new:
                _nft("flush", "chain", family, name, chain)
            for chain in new:
                _nft("delete", "chain", family, name, chain)
                removed.append(f"nftables chain {table} {chain}")
        return removed


def nft_ruleset() -> str:
    """``nft --stateless list ruleset``: the rules as text, without counters."""
    listing = ["nft", "--stateless", "list", "ruleset"]
    return subprocess.run(listing, capture_output=True, text=True, check=True).stdout


def nft_chains() -> dict[str, list[str]]:
    """Every nftables table on the machine (``<family> <name>``) with its chains."""
    tables: dict[str, list[str]] = {}
    for item in _nft_json("list", "ruleset"):
        if "table" in item:
            tables.setdefault(f"{item['table']['family']} {item['table']['name']}", [])
        elif "chain" in item:
            chain = item["chain"]
            tables.setdefault(f"{chain['family']} {chain['table']}", []).append(chain["name"])
    return tables


def _rules_jumping_to(family: str, table: str, chain: str, targets: set[str]) -> list[int]:
    handles = []
    for item in _nft_json("list", "chain", family, table, chain):
        rule = item.get("rule")
        if rule and any(_jump_target(expression) in targets for expression in rule["expr"]):
            handles.append(int(rule["handle"]))
    return handles


def _jump_target(expression: dict[str, Any]) -> str | None:
    for kind in ("jump", "goto"):
        verdict = expression.get(kind)
        if isinstance(verdict, dict):
            return str(verdict.get("target"))
    return None


def _nft_json(*args: str) -> list[dict[str, Any]]:
    output = _nft("-j", *args)
    items: list[dict[str, Any]] = json.loads(output)["nftables"] if output.strip() else []
    return items


def _nft(*args: str) -> str:
    result = subprocess.run(["nft", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"nft {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name


def mounts_under(path: str) -> list[str]:
    """Mount points at or below ``path``, deepest first."""
    prefix = path.rstrip("/") + "/"
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == path or point.startswith(prefix):
            points.append(point)
    return sorted(points, key=len, reverse=True)


def _unmount_under(path: str) -> None:
    for point in mounts_under(path):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)
