from __future__ import annotations

import pytest

from kai_scale.hooks.helm import Chart, upgrade_install_argv
from kai_scale.runner.outputs import parse_output_urls


def test_chart_installs_at_its_pinned_version_idempotently() -> None:
    chart = Chart(
        release="fake-gpu-operator",
        chart="oci://ghcr.io/run-ai/fake-gpu-operator/fake-gpu-operator",
        version="0.0.58",
        namespace="gpu-operator",
        values={"topology.nodePools.default.gpuCount": "8"},
    )
    argv = upgrade_install_argv(chart=chart, kubeconfig="/k")
    assert argv[:5] == ["helm", "upgrade", "--install", "fake-gpu-operator", chart.chart]
    assert argv[argv.index("--version") + 1] == "0.0.58"
    assert "--devel" in argv
    assert argv[argv.index("--set") + 1] == "topology.nodePools.default.gpuCount=8"
    assert argv[-2:] == ["--kubeconfig", "/k"]


def test_repo_chart() -> None:
    chart = Chart(
        release="pyroscope",
        chart="pyroscope",
        version="1.9.2",
        namespace="monitoring",
        repo="https://grafana.github.io/helm-charts",
    )
    argv = upgrade_install_argv(chart=chart, kubeconfig=None)
    assert argv[argv.index("--repo") + 1] == "https://grafana.github.io/helm-charts"
    assert "--devel" not in argv
    assert "--kubeconfig" not in argv


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (None, "is not set"),
        ("{", "is not JSON"),
        ('["u"]', "must be a JSON object"),
        ('{"a": 1}', "JSON object"),
    ],
)
def test_bad_output_urls(raw: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_output_urls(raw)
