"""``make local-down`` leaves the machine as ``make local-up`` found it; ``up`` brings it all back.

Runs after every other test (it restarts the session's environment, and the restarted cluster has a
new CA).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from localenv.environment import LocalEnvironment
from localenv.host_state import FIXED_PATHS, HostSnapshot, mounts_under, nft_chains, nft_ruleset
from localenv.node import CGROUP_ROOT
from localenv.processes import port_in_use, processes_under

pytestmark = pytest.mark.restarts_local_env


def test_down_leaves_the_machine_as_up_found_it(local_env: LocalEnvironment) -> None:
    config = local_env.config
    before = HostSnapshot.load(local_env.node().snapshot_path)
    assert before is not None, "up saves the machine's state before it changes anything"
    network = local_env.node().config.network
    database = local_env.postgres()
    assert database.answers()
    assert network.exists()
    assert network.guard_installed()
    local_env.down()
    try:
        assert not list(processes_under(str(config.home))), "no process"
        assert not mounts_under(str(config.home)), "no mount"
        assert not network.exists(), "no bridge (and with it no pod veth)"
        assert not network.guard_installed()
        assert nft_chains() == before.nft_chains, "no nftables table or chain"
        assert nft_ruleset() == before.nft_ruleset, "no nftables (iptables-nft) rule"
        assert HostSnapshot.take().sysctls == before.sysctls, "kernel settings restored"
        assert [path for path in FIXED_PATHS if Path(path).exists()] == before.existing_paths
        assert not any((hierarchy / CGROUP_ROOT).exists() for hierarchy in Path("/sys/fs/cgroup").iterdir())
        assert not [port for port in config.own_ports().values() if port_in_use(port)], "no port"
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
        assert "veth" not in links
        assert not local_env.node().shim_socket_dir.exists()
        assert not config.home.exists()
        assert not database.data_dir.exists(), "no database directory"
        assert not [pid for pid in processes_under(str(database.data_dir))], "no database process"
    finally:
        local_env.up(node_count=0)
    assert local_env.is_up()
    assert network.guard_installed()
