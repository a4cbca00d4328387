"""The host snapshot puts nftables back as they were, touching only what kube-proxy and the kubelet add.

Runs on real nftables, in a network namespace of the test's own (nftables are per namespace), so the
session's node and the machine's own rules are never touched.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import REPO

SCENARIO = textwrap.dedent(
    """
    import subprocess
    from localenv.host_state import HostSnapshot, nft_chains

    def nft(script):
        subprocess.run(["nft", "-f", "-"], input=script, text=True, check=True)

    # Before the node: a table of another program's, and a node-named table that was already there.
    nft('''
    table ip other {
        chain before {
            type filter hook forward priority 50; policy accept;
        }
    }
    table ip nat {
        chain THEIRS {
        }
    }
    ''')
    snapshot = HostSnapshot.take()
    # What a node adds, and what someone else adds meanwhile.
    nft('''
    table ip filter {
        chain KUBE-FIREWALL {
        }
    }
    table ip nat {
        chain KUBE-SERVICES {
        }
        chain THEIRS {
            ip daddr 10.0.0.1 jump KUBE-SERVICES
        }
        chain theirs-later {
        }
    }
    table ip libvirt_like {
        chain guest {
        }
    }
    ''')
    restored = snapshot.restore()
    after = nft_chains()
    assert "nftables table ip filter" in restored, restored
    assert "nftables chain ip nat KUBE-SERVICES" in restored, restored
    assert "ip filter" not in after, after
    assert after["ip nat"] == ["THEIRS", "theirs-later"], after
    assert after["ip other"] == ["before"], after
    assert after["ip libvirt_like"] == ["guest"], "not the node's: kept"
    jumps = subprocess.run(["nft", "list", "chain", "ip", "nat", "THEIRS"], capture_output=True, text=True)
    assert "jump" not in jumps.stdout, jumps.stdout
    print("ok")
    """
)


def test_restore_removes_only_what_the_node_added() -> None:
    result = subprocess.run(
        ["unshare", "--net", "--", sys.executable, "-c", SCENARIO],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout.strip()) == (0, "ok"), result.stderr
