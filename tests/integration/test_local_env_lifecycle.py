"""Starting a second local environment beside the session's one: what ``up`` refuses before it starts.

A failed start after the node's preparation, and ``down``, run on the session's environment (one node
per machine): test_machine_restored.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from localenv.environment import LocalEnvironment
from localenv.processes import ComponentError
from tests.waiting import free_ports


def _second_environment(local_env: LocalEnvironment, home: Path) -> LocalEnvironment:
    """The session's settings (its node's included) on ports of its own.

    The same bridge: were ``up`` to get as far as the node's preparation, it would refuse there (one
    node per machine) and leave the session's node alone.
    """
    apiserver, s3, registry, postgres, mirror = free_ports(5)
    ports = dataclasses.replace(
        local_env.config.ports,
        kube_apiserver=apiserver,
        s3=s3,
        registry=registry,
        postgres=postgres,
        mirror=mirror,
    )
    return LocalEnvironment(dataclasses.replace(local_env.config, home=home, ports=ports))


def test_port_in_use_names_the_component_and_starts_nothing(
    local_env: LocalEnvironment, tmp_path: Path
) -> None:
    second = _second_environment(local_env, tmp_path / "second")
    clashing = dataclasses.replace(second.config.ports, kube_apiserver=local_env.config.ports.kube_apiserver)
    second = LocalEnvironment(dataclasses.replace(second.config, ports=clashing))
    with pytest.raises(ComponentError, match=rf"kube-apiserver port {clashing.kube_apiserver}"):
        second.up(node_count=0)
    assert not (tmp_path / "second").exists()
    assert local_env.is_up()


def test_nodes_on_a_stopped_environment_are_refused_before_anything_starts(
    local_env: LocalEnvironment, tmp_path: Path
) -> None:
    second = _second_environment(local_env, tmp_path / "second")
    with pytest.raises(ComponentError, match=r"--nodes needs a running environment .* `make demo`"):
        second.up(node_count=5)
    assert not (tmp_path / "second").exists()
    assert local_env.is_up()
