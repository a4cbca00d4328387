"""The host snapshot puts this machine's real nftables back as they were.

New tables go; new chains in old tables go with the rules that jump to them; what was there stays.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest

from localenv.host_state import HostSnapshot, nft_chains


def _nft(script: str) -> None:
    subprocess.run(["nft", "-f", "-"], input=script, text=True, check=True)


@pytest.fixture
def table() -> Iterator[str]:
    """A table of this test's own with one chain, like one another program made before the node."""
    name = f"kai_test_{uuid.uuid4().hex[:6]}"
    chain = "type filter hook forward priority 50; policy accept;"
    _nft(f"table ip {name} {{\n chain before {{\n {chain}\n }}\n}}\n")
    yield name
    subprocess.run(["nft", "delete", "table", "ip", name], capture_output=True, check=False)


def test_restore_removes_what_came_after_and_keeps_what_was_there(table: str) -> None:
    snapshot = HostSnapshot.take()
    new_table = f"{table}_new"
    _nft(
        f"""
        table ip {table} {{
            chain KUBE-NEW {{
            }}
            chain before {{
                ip daddr 10.0.0.1 jump KUBE-NEW
            }}
        }}
        table ip {new_table} {{
            chain KUBE-ALSO {{
            }}
        }}
        """
    )
    try:
        restored = snapshot.restore()
    finally:
        subprocess.run(["nft", "delete", "table", "ip", new_table], capture_output=True, check=False)
    assert f"nftables table ip {new_table}" in restored
    assert f"nftables chain ip {table} KUBE-NEW" in restored
    assert nft_chains()[f"ip {table}"] == ["before"]
    listing = ["nft", "list", "chain", "ip", table, "before"]
    assert "jump" not in subprocess.run(listing, capture_output=True, text=True, check=True).stdout
    assert nft_chains() == snapshot.nft_chains
