from __future__ import annotations

import json
from dataclasses import replace

import pytest

from kai_scale.hooks.helm_commands import (
    Chart,
    HelmTarget,
    is_deployed,
    list_argv,
    upgrade_install_argv,
    values_match,
)

FAKE_GPU_OPERATOR = Chart(
    release="fake-gpu-operator",
    chart="oci://ghcr.io/run-ai/fake-gpu-operator/fake-gpu-operator",
    version="0.0.73",
    namespace="gpu-operator",
    values={"topology.nodePools.default.gpuCount": "8"},
)


def test_chart_installs_at_its_pinned_version_idempotently() -> None:
    argv = upgrade_install_argv(chart=FAKE_GPU_OPERATOR, target=HelmTarget(kubeconfig="/k", context="ctx"))
    assert argv[:5] == ["helm", "upgrade", "--install", "fake-gpu-operator", FAKE_GPU_OPERATOR.chart]
    assert argv[argv.index("--version") + 1] == "0.0.73"
    assert argv[argv.index("--set") + 1] == "topology.nodePools.default.gpuCount=8"
    assert argv[-4:] == ["--kubeconfig", "/k", "--kube-context", "ctx"]


def test_repo_chart() -> None:
    chart = Chart(
        release="pyroscope",
        chart="pyroscope",
        version="1.12.0",
        namespace="monitoring",
        repo="https://grafana.github.io/helm-charts",
    )
    argv = upgrade_install_argv(chart=chart, target=HelmTarget(kubeconfig=None))
    assert argv[argv.index("--repo") + 1] == "https://grafana.github.io/helm-charts"
    assert "--kubeconfig" not in argv
    assert "--kube-context" not in argv


def test_the_chart_name_is_the_last_part_of_its_reference() -> None:
    assert FAKE_GPU_OPERATOR.name == "fake-gpu-operator"
    assert list_argv(chart=FAKE_GPU_OPERATOR, target=HelmTarget(kubeconfig=None))[-2:] == ["--output", "json"]


@pytest.mark.parametrize(
    ("releases", "deployed"),
    [
        ([], False),
        ([{"name": "fake-gpu-operator", "chart": "fake-gpu-operator-0.0.73", "status": "deployed"}], True),
        ([{"name": "fake-gpu-operator", "chart": "fake-gpu-operator-0.0.58", "status": "deployed"}], False),
        ([{"name": "fake-gpu-operator", "chart": "fake-gpu-operator-0.0.73", "status": "failed"}], False),
        ([{"name": "other", "chart": "fake-gpu-operator-0.0.73", "status": "deployed"}], False),
    ],
)
def test_a_release_counts_as_deployed_only_at_the_pinned_version(
    releases: list[dict[str, str]], deployed: bool
) -> None:
    assert is_deployed(json.dumps(releases), chart=FAKE_GPU_OPERATOR) is deployed


@pytest.mark.parametrize(
    ("release_values", "match"),
    [
        ({"topology": {"nodePools": {"default": {"gpuCount": 8}}}}, True),
        ({"topology": {"nodePools": {"default": {"gpuCount": 4}}}}, False),
        (None, False),
        ({"topology": {"nodePools": {"default": {"gpuCount": 8}}}, "extra": True}, False),
    ],
)
def test_a_release_is_up_to_date_only_with_the_same_set_values(
    release_values: dict[str, object] | None, match: bool
) -> None:
    """Helm get values gives nested, typed values; the chart's --set values are flat strings."""
    assert values_match(json.dumps(release_values), chart=FAKE_GPU_OPERATOR) is match


def test_a_key_with_a_dot_of_its_own_matches_its_escaped_set_form() -> None:
    """Pyroscope's ``extraArgs`` are flags named with dots: --set escapes them, helm returns them whole."""
    chart = replace(FAKE_GPU_OPERATOR, values={"pyroscope.extraArgs.log\\.level": "info"})
    assert values_match(json.dumps({"pyroscope": {"extraArgs": {"log.level": "info"}}}), chart=chart)
    assert not values_match(json.dumps({"pyroscope": {"extraArgs": {"log": {"level": "info"}}}}), chart=chart)
