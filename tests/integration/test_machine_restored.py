"""``make local-down`` leaves the machine as ``make local-up`` found it; ``up`` brings it all back.

So does a start that fails after it prepared the node: one node per machine, so it runs while the
session's environment is down. Runs after every other test (it restarts the session's environment,
and the restarted cluster has a new CA).
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from localenv.environment import LocalEnvironment
from localenv.host_state import FIXED_PATHS, HostSnapshot, mounts_under, nft_chains, nft_ruleset
from localenv.node_config import CGROUP_ROOT
from localenv.processes import ComponentError, port_in_use, processes_under

pytestmark = pytest.mark.restarts_local_env


def test_down_and_a_failed_start_leave_the_machine_as_up_found_it(
    local_env: LocalEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``down`` also leaves alone the kubeconfig of another environment that KUBECONFIG points at.

    (``eval "$(make -s local-env)"`` exports it; every environment's cluster has the same name, so a
    kwokctl that fell back on KUBECONFIG would remove the other environment's context.)
    """
    config = local_env.config
    before = HostSnapshot.load(local_env.node().snapshot_path)
    assert before is not None, "up saves the machine's state before it changes anything"
    network = local_env.node().config.network
    database = local_env.postgres()
    assert database.answers()
    assert network.exists()
    assert network.guard_installed()
    pids = [*processes_under(str(config.home)), *processes_under(str(database.data_dir))]
    assert pids, "the environment runs processes from its state and database directories"
    other_kubeconfig = tmp_path / "other-kubeconfig"
    shutil.copyfile(config.kubeconfig, other_kubeconfig)
    other_kubeconfig_before = other_kubeconfig.read_text()
    with monkeypatch.context() as patch:
        patch.setenv("KUBECONFIG", str(other_kubeconfig))
        local_env.down()
    try:
        _assert_machine_as_found(local_env, before)
        assert not config.home.exists()
        assert not [pid for pid in pids if _alive(pid)], "no process the environment ran"
        assert other_kubeconfig.read_text() == other_kubeconfig_before
        _assert_a_start_whose_etcd_fails_is_named_and_undone(local_env, tmp_path, before)
    finally:
        local_env.up(node_count=0)
    assert local_env.is_up()
    assert network.guard_installed()


def _assert_a_start_whose_etcd_fails_is_named_and_undone(
    local_env: LocalEnvironment, tmp_path: Path, before: HostSnapshot
) -> None:
    """The etcd kwokctl starts fails: after the node's preparation and the own components' start."""
    broken_bin = tmp_path / "bin"
    broken_bin.mkdir()
    for binary in local_env.config.bin_dir.iterdir():
        (broken_bin / binary.name).symlink_to(binary.resolve())
    (broken_bin / "etcd").unlink()
    (broken_bin / "etcd").write_text("#!/bin/sh\necho 'etcd: simulated start failure' >&2\nexit 1\n")
    (broken_bin / "etcd").chmod(0o755)
    home = tmp_path / "broken"
    broken = LocalEnvironment(dataclasses.replace(local_env.config, home=home, bin_dir=broken_bin))
    with pytest.raises(ComponentError, match=r"kwokctl could not create the cluster.*kwokctl\.log") as failed:
        broken.up(node_count=0)
    # Only the logs stay, so the log the message names exists and says what failed.
    assert [path.name for path in home.iterdir()] == ["logs"]
    kwokctl_log = broken.config.logs_dir / "kwokctl.log"
    assert str(kwokctl_log) in str(failed.value)
    assert "etcd: simulated start failure" in kwokctl_log.read_text()
    _assert_machine_as_found(broken, before)


def _assert_machine_as_found(environment: LocalEnvironment, before: HostSnapshot) -> None:
    """Nothing of ``environment`` is left on the machine but its state directory (the caller's to check)."""
    config = environment.config
    network = environment.node().config.network
    database = environment.postgres()
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
    assert not environment.node().config.shim_socket_dir.exists()
    assert not database.data_dir.exists(), "no database directory"
    assert not [pid for pid in processes_under(str(database.data_dir))], "no database process"


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie has exited; its parent has yet to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
