"""Starting and stopping a second local environment beside the session's one: failures and clean-up."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from localenv.environment import LocalEnvironment
from localenv.processes import ComponentError, port_in_use, processes_under
from localenv.settings import Ports, Settings
from tests.waiting import free_ports


def _second_environment(local_env: LocalEnvironment, home: Path) -> LocalEnvironment:
    apiserver, kwok, prometheus, s3 = free_ports(4)
    ports = Ports(kube_apiserver=apiserver, kwok_controller=kwok, prometheus=prometheus, s3=s3)
    # Without a real node: the session's environment has the machine's one.
    config = Settings(home=home, bin_dir=local_env.config.bin_dir, ports=ports, real_node=False)
    return LocalEnvironment(config)


def test_port_in_use_names_the_component_and_starts_nothing(
    local_env: LocalEnvironment, tmp_path: Path
) -> None:
    second = _second_environment(local_env, tmp_path / "second")
    clashing = dataclasses.replace(second.config.ports, kube_apiserver=local_env.config.ports.kube_apiserver)
    second = LocalEnvironment(dataclasses.replace(second.config, ports=clashing))
    with pytest.raises(ComponentError, match=rf"kube-apiserver port {clashing.kube_apiserver}"):
        second.up(node_count=0)
    assert not (tmp_path / "second").exists()


def test_nodes_on_a_stopped_environment_are_refused_before_anything_starts(
    local_env: LocalEnvironment, tmp_path: Path
) -> None:
    second = _second_environment(local_env, tmp_path / "second")
    with pytest.raises(ComponentError, match=r"--nodes needs a running environment .* `make demo`"):
        second.up(node_count=5)
    assert not (tmp_path / "second").exists()


def test_component_that_does_not_come_up_is_named_and_nothing_is_left(
    local_env: LocalEnvironment, tmp_path: Path
) -> None:
    broken_bin = tmp_path / "bin"
    broken_bin.mkdir()
    for binary in local_env.config.bin_dir.iterdir():
        (broken_bin / binary.name).symlink_to(binary.resolve())
    (broken_bin / "etcd").unlink()
    (broken_bin / "etcd").write_text("#!/bin/sh\necho 'etcd: simulated start failure' >&2\nexit 1\n")
    (broken_bin / "etcd").chmod(0o755)
    second = _second_environment(local_env, tmp_path / "broken")
    second = LocalEnvironment(dataclasses.replace(second.config, bin_dir=broken_bin))
    with pytest.raises(ComponentError, match=r"kwokctl could not create the cluster.*kwokctl\.log") as failed:
        second.up(node_count=0)
    # Only the logs stay, so the log the message names exists and says what failed.
    assert [path.name for path in (tmp_path / "broken").iterdir()] == ["logs"]
    kwokctl_log = second.config.logs_dir / "kwokctl.log"
    assert str(kwokctl_log) in str(failed.value)
    assert "etcd: simulated start failure" in kwokctl_log.read_text()
    assert not list(processes_under(str(tmp_path / "broken")))
    assert not any(port_in_use(port) for port in second.config.own_ports().values())


def test_down_leaves_no_process_port_or_directory(
    local_env: LocalEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also leaves alone the kubeconfig of another environment that KUBECONFIG points at.

    (``eval "$(make -s local-env)"`` exports it; both clusters have the same name, so a kwokctl
    that fell back on KUBECONFIG would remove the other environment's context.)
    """
    monkeypatch.setenv("KUBECONFIG", str(local_env.config.kubeconfig))
    kubeconfig_before = local_env.config.kubeconfig.read_text()
    home = tmp_path / "full"
    second = _second_environment(local_env, home)
    try:
        second.up(node_count=0)
        assert second.is_up()
        pids = list(processes_under(str(home)))
        assert pids, "the second environment should run processes from its state directory"
    finally:
        second.down()
    assert not home.exists()
    assert not list(processes_under(str(home)))
    assert not any(os.path.exists(f"/proc/{pid}") and _not_zombie(pid) for pid in pids)
    assert not any(port_in_use(port) for port in second.config.own_ports().values())
    assert local_env.config.kubeconfig.read_text() == kubeconfig_before


def _not_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
