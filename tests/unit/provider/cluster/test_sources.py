"""KAI_SCALE_SOURCE_MIRRORS: where the setup fetches charts and manifests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kai_scale.cluster.installs import read_installs
from kai_scale.cluster.sources import Source, Sources
from kai_scale.hooks.helm_commands import Chart, HelmTarget, upgrade_install_argv
from kai_scale.settings import PipelineSettings, SettingsError
from tests.conftest import REPO

RULES = [
    {"upstream": "oci://ghcr.io/", "mirror": "oci://127.0.0.1:25000/ghcr.io/", "plain_http": True},
    {"upstream": "oci://ghcr.io/run-ai/", "mirror": "oci://mirror.internal/run-ai/"},
    {"upstream": "https://github.com/", "mirror": "file:///srv/mirror/github.com/"},
]


def test_the_longest_matching_prefix_wins_and_the_rest_goes_upstream() -> None:
    sources = Sources.parse(json.dumps(RULES))
    assert sources.resolve("oci://ghcr.io/prometheus-community/charts/kube-prometheus-stack") == Source(
        "oci://127.0.0.1:25000/ghcr.io/prometheus-community/charts/kube-prometheus-stack", plain_http=True
    )
    assert sources.resolve("oci://ghcr.io/run-ai/fake-gpu-operator/fake-gpu-operator") == Source(
        "oci://mirror.internal/run-ai/fake-gpu-operator/fake-gpu-operator"
    )
    assert sources.resolve(
        "https://github.com/kubernetes-sigs/kwok/releases/download/v0.8.0/kwok.yaml"
    ) == Source("file:///srv/mirror/github.com/kubernetes-sigs/kwok/releases/download/v0.8.0/kwok.yaml")
    upstream = "https://grafana.github.io/helm-charts"
    assert sources.resolve(upstream) == Source(upstream)


def test_no_setting_means_upstream() -> None:
    assert Sources.parse(None).resolve("oci://ghcr.io/x") == Source("oci://ghcr.io/x")
    assert Sources.parse("  ") == Sources()


def test_a_plain_http_mirror_makes_helm_use_plain_http() -> None:
    chart = Chart(
        release="r", chart="oci://127.0.0.1:25000/ghcr.io/x/c", version="1", namespace="n", plain_http=True
    )
    assert "--plain-http" in upgrade_install_argv(chart=chart, target=HelmTarget(kubeconfig=None))
    secure = Chart(release="r", chart="oci://ghcr.io/x/c", version="1", namespace="n")
    assert "--plain-http" not in upgrade_install_argv(chart=secure, target=HelmTarget(kubeconfig=None))


def test_the_setting_is_read_with_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAI_SCALE_SOURCE_MIRRORS", json.dumps(RULES))
    settings = PipelineSettings.from_environment(default_include_dir=Path("include"))
    assert settings.source_mirrors == Sources.parse(json.dumps(RULES))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("oci://ghcr.io/=oci://mirror/", "must be a JSON list"),
        ('[{"upstream": "oci://ghcr.io/"}]', "mirror"),
        ('[{"upstream": "oci://a/", "mirror": "oci://b/", "plain": true}]', "Extra inputs are not permitted"),
        ('[{"upstream": "ghcr.io/", "mirror": "oci://b/"}]', "'ghcr.io/' must start with one of oci://"),
        ('[{"upstream": "oci://ghcr.io/", "mirror": "https://b/"}]', "an OCI reference can only be mirrored"),
        (
            '[{"upstream": "oci://a/", "mirror": "oci://b/"}, {"upstream": "oci://a/", "mirror": "oci://c/"}]',
            "names an upstream prefix twice",
        ),
    ],
)
def test_a_bad_setting_names_the_variable(monkeypatch: pytest.MonkeyPatch, value: str, message: str) -> None:
    monkeypatch.setenv("KAI_SCALE_SOURCE_MIRRORS", value)
    with pytest.raises(SettingsError, match="KAI_SCALE_SOURCE_MIRRORS") as raised:
        PipelineSettings.from_environment(default_include_dir=Path("include"))
    assert message in str(raised.value)


def test_every_source_the_shipped_installs_name_can_be_mirrored() -> None:
    """An air-gapped cluster can mirror all of installs.yaml: OCI charts, chart repositories, manifests."""
    installs = read_installs(REPO / "include")
    sources = Sources.parse(
        json.dumps(
            [
                {"upstream": "oci://", "mirror": "oci://mirror.internal/"},
                {"upstream": "https://", "mirror": "https://mirror.internal/"},
            ]
        )
    )
    references = [*installs.kwok.manifests, *installs.kwok.stages, *installs.kwok_operator.manifests]
    references += [spec.repo or spec.chart for spec in installs.charts.values()]
    assert references, "installs.yaml names its sources"
    for reference in references:
        assert sources.resolve(reference).reference.startswith(
            ("oci://mirror.internal/", "https://mirror.internal/")
        )


def test_a_chart_repository_is_mirrored_too() -> None:
    sources = Sources.parse(
        json.dumps([{"upstream": "https://grafana.github.io/", "mirror": "https://charts.internal/grafana/"}])
    )
    assert (
        sources.resolve("https://grafana.github.io/helm-charts").reference
        == "https://charts.internal/grafana/helm-charts"
    )
