"""kai-scale-place-pods: helm's post-renderer that puts the installed charts' pods on the system nodes."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
import yaml

from kai_scale.cluster.placement import Placement, main, placed
from kai_scale.hooks.helm_commands import Chart, HelmTarget, upgrade_install_argv

TOLERATION = {"key": "role", "operator": "Equal", "value": "system", "effect": "NoSchedule"}
PLACEMENT = Placement(node_selector={"role": "system"}, tolerations=(TOLERATION,))
RENDERED = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: status-updater}
spec:
  template:
    spec:
      tolerations: [{key: other, operator: Exists}]
      containers: [{name: main, image: x}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: device-plugin}
spec:
  template:
    spec:
      nodeSelector: {nvidia.com/gpu.deploy.device-plugin: "true"}
      containers: [{name: main, image: x}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec: {jobTemplate: {spec: {template: {spec: {containers: [{name: main, image: x}]}}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: topology}
"""


def test_pod_templates_get_the_placement_but_daemonsets_keep_their_own() -> None:
    deployment, daemonset, cronjob, configmap = placed(list(yaml.safe_load_all(RENDERED)), PLACEMENT)
    spec = deployment["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"role": "system"}
    assert spec["tolerations"] == [{"key": "other", "operator": "Exists"}, TOLERATION]
    assert daemonset["spec"]["template"]["spec"]["nodeSelector"] == {
        "nvidia.com/gpu.deploy.device-plugin": "true"
    }
    assert "tolerations" not in daemonset["spec"]["template"]["spec"]
    assert cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["nodeSelector"] == {"role": "system"}
    assert configmap == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "topology"}}


def test_placing_twice_adds_nothing_more() -> None:
    once = placed(list(yaml.safe_load_all(RENDERED)), PLACEMENT)
    assert placed(yaml.safe_load_all(yaml.safe_dump_all(once)), PLACEMENT) == once


def test_the_command_reads_stdin_and_writes_stdout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(RENDERED))
    assert main(["--placement", PLACEMENT.to_json()]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert documents == placed(list(yaml.safe_load_all(RENDERED)), PLACEMENT)


def test_the_installed_command_is_what_helm_runs() -> None:
    """The distribution's console script, as helm's --post-renderer finds it beside the worker's Python."""
    command, *arguments = PLACEMENT.post_renderer()
    result = subprocess.run([command, *arguments], input=RENDERED, capture_output=True, text=True, check=True)
    deployment = next(iter(yaml.safe_load_all(result.stdout)))
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == {"role": "system"}


def test_helm_gets_the_post_renderer_and_nothing_without_a_placement() -> None:
    chart = Chart(release="r", chart="c", version="1", namespace="n", post_renderer=PLACEMENT.post_renderer())
    argv = upgrade_install_argv(chart=chart, target=HelmTarget(kubeconfig=None))
    assert argv[argv.index("--post-renderer") + 1].endswith("kai-scale-place-pods")
    assert argv.count("--post-renderer-args") == 2
    assert Placement().post_renderer() == ()
