from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from kai_scale.settings import (
    AlertSettings,
    PipelineSettings,
    ResultsLocation,
    SettingsError,
    Toleration,
)
from tests.conftest import ALERT_VARIABLES, REPO


@pytest.fixture(autouse=True)
def _no_alert_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ALERT_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_alerts_are_off_by_default() -> None:
    alerts = AlertSettings.from_environment()
    assert not alerts.enabled
    assert (alerts.email_to, alerts.webhook_conn_id, alerts.run_alert_after) == ((), None, None)


def test_blank_values_count_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """docker-compose passes an unset ${VAR:-} as an empty string."""
    for name in ALERT_VARIABLES:
        monkeypatch.setenv(name, " ")
    assert not AlertSettings.from_environment().enabled
    assert PipelineSettings.from_environment(default_include_dir=REPO / "include").results_url is None


def test_every_alert_setting_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAI_SCALE_ALERT_EMAIL_TO", "ops@example.com, KAI team <kai@example.com>,")
    monkeypatch.setenv("KAI_SCALE_ALERT_EMAIL_FROM", "KAI scale <scale@example.com>")
    monkeypatch.setenv("KAI_SCALE_ALERT_SMTP_CONN_ID", "smtp_alerts")
    monkeypatch.setenv("KAI_SCALE_ALERT_WEBHOOK_CONN_ID", "alerts_webhook")
    monkeypatch.setenv("KAI_SCALE_RUN_ALERT_AFTER", "5h30m")
    alerts = AlertSettings.from_environment()
    assert alerts.enabled
    assert alerts.email_to == ("ops@example.com", "KAI team <kai@example.com>")
    assert alerts.email_from == "KAI scale <scale@example.com>"
    assert alerts.smtp_conn_id == "smtp_alerts"
    assert alerts.webhook_conn_id == "alerts_webhook"
    assert alerts.run_alert_after == timedelta(hours=5, minutes=30)


def test_a_webhook_alone_is_a_channel_and_mail_uses_the_default_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAI_SCALE_ALERT_WEBHOOK_CONN_ID", "alerts_webhook")
    alerts = AlertSettings.from_environment()
    assert alerts.enabled
    assert alerts.smtp_conn_id == "smtp_default"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"KAI_SCALE_ALERT_EMAIL_TO": "ops@example.com; dev@example.com"},
            "KAI_SCALE_ALERT_EMAIL_TO must be mail addresses like ops@example.com, "
            "got 'ops@example.com; dev@example.com'",
        ),
        ({"KAI_SCALE_ALERT_EMAIL_TO": "ops"}, "KAI_SCALE_ALERT_EMAIL_TO must be mail addresses"),
        (
            {"KAI_SCALE_ALERT_EMAIL_TO": "ops@example.com", "KAI_SCALE_ALERT_EMAIL_FROM": "airflow"},
            "KAI_SCALE_ALERT_EMAIL_FROM must be mail addresses like ops@example.com, got 'airflow'",
        ),
        (
            {"KAI_SCALE_ALERT_EMAIL_FROM": "scale@example.com"},
            "KAI_SCALE_ALERT_EMAIL_FROM is set ('scale@example.com') but KAI_SCALE_ALERT_EMAIL_TO is not",
        ),
        (
            {"KAI_SCALE_ALERT_SMTP_CONN_ID": "smtp_alerts"},
            "KAI_SCALE_ALERT_SMTP_CONN_ID is set ('smtp_alerts') but KAI_SCALE_ALERT_EMAIL_TO is not",
        ),
        (
            {"KAI_SCALE_ALERT_WEBHOOK_CONN_ID": "hook", "KAI_SCALE_RUN_ALERT_AFTER": "six hours"},
            "KAI_SCALE_RUN_ALERT_AFTER must be a duration like 90m, 1h30m or 45s, got 'six hours'",
        ),
        (
            {"KAI_SCALE_ALERT_WEBHOOK_CONN_ID": "hook", "KAI_SCALE_RUN_ALERT_AFTER": "0s"},
            "KAI_SCALE_RUN_ALERT_AFTER must be positive, got '0s'",
        ),
        (
            {"KAI_SCALE_RUN_ALERT_AFTER": "6h"},
            "KAI_SCALE_RUN_ALERT_AFTER is set ('6h') but no alert channel is: "
            "set KAI_SCALE_ALERT_EMAIL_TO or KAI_SCALE_ALERT_WEBHOOK_CONN_ID",
        ),
    ],
)
def test_bad_alert_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], message: str
) -> None:
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as raised:
        AlertSettings.from_environment()
    assert message in str(raised.value)


def test_the_results_url_is_a_prefix_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAI_SCALE_RESULTS_URL", "https://results.example.com/Public")
    settings = PipelineSettings.from_environment(default_include_dir=REPO / "include")
    assert settings.results_url == "https://results.example.com/Public/"
    monkeypatch.setenv("KAI_SCALE_RESULTS_URL", "s3://kai-scale-results/Public/")
    with pytest.raises(SettingsError, match="KAI_SCALE_RESULTS_URL must be an http"):
        PipelineSettings.from_environment(default_include_dir=REPO / "include")


def test_runner_placement_is_read_as_kubectl_writes_labels_and_taints(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAI_SCALE_SYSTEM_NODE_SELECTOR", "kai-scale.dev/node-role=system, pool=ops")
    monkeypatch.setenv(
        "KAI_SCALE_SYSTEM_TOLERATIONS", "kai-scale.dev/node-role=system:NoSchedule,dedicated:NoExecute"
    )
    settings = PipelineSettings.from_environment(default_include_dir=REPO / "include")
    assert settings.system_node_selector == {"kai-scale.dev/node-role": "system", "pool": "ops"}
    assert settings.system_tolerations == (
        Toleration(key="kai-scale.dev/node-role", value="system", effect="NoSchedule"),
        Toleration(key="dedicated", value=None, effect="NoExecute"),
    )


def test_runner_placement_defaults_to_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAI_SCALE_SYSTEM_NODE_SELECTOR", raising=False)
    monkeypatch.setenv("KAI_SCALE_SYSTEM_TOLERATIONS", "")
    settings = PipelineSettings.from_environment(default_include_dir=REPO / "include")
    assert settings.system_node_selector == {}
    assert settings.system_tolerations == ()


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("KAI_SCALE_SYSTEM_NODE_SELECTOR", "system", "needs labels like kai-scale.dev/node-role=system"),
        ("KAI_SCALE_SYSTEM_NODE_SELECTOR", "Bad Key=x", "got 'Bad Key=x'"),
        ("KAI_SCALE_SYSTEM_NODE_SELECTOR", "role=not ok", "got 'role=not ok'"),
        ("KAI_SCALE_SYSTEM_NODE_SELECTOR", "role=a,role=b", "names label role twice"),
        ("KAI_SCALE_SYSTEM_TOLERATIONS", "role=system", "effect one of NoSchedule, PreferNoSchedule"),
        ("KAI_SCALE_SYSTEM_TOLERATIONS", "role=system:NoSchedul", "got 'role=system:NoSchedul'"),
        ("KAI_SCALE_SYSTEM_TOLERATIONS", "a b:NoSchedule", "'a b' is not a taint key"),
    ],
)
def test_bad_runner_placement_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=name) as raised:
        PipelineSettings.from_environment(default_include_dir=REPO / "include")
    assert message in str(raised.value)


def test_the_pipeline_and_the_trend_view_read_one_results_location(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAI_SCALE_AWS_CONN_ID", "results_s3")
    monkeypatch.setenv("KAI_SCALE_RESULTS_BUCKET", "nightly-results")
    monkeypatch.setenv("KAI_SCALE_RESULTS_PREFIX", "team-a/Public")
    location = ResultsLocation.from_environment()
    assert location == ResultsLocation(
        aws_conn_id="results_s3", bucket="nightly-results", prefix="team-a/Public/"
    )
    settings = PipelineSettings.from_environment(default_include_dir=REPO / "include")
    assert (settings.aws_conn_id, settings.results_bucket, settings.results_prefix) == (
        location.aws_conn_id,
        location.bucket,
        location.prefix,
    )


def test_kai_is_tuned_for_scale_unless_the_deployment_picks_another_profile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KAI_SCALE_KAI_TUNING_PROFILE", raising=False)
    assert (
        PipelineSettings.from_environment(default_include_dir=REPO / "include").kai_tuning_profile == "scale"
    )
    monkeypatch.setenv("KAI_SCALE_KAI_TUNING_PROFILE", " ")  # compose's unset
    assert (
        PipelineSettings.from_environment(default_include_dir=REPO / "include").kai_tuning_profile == "scale"
    )
    monkeypatch.setenv("KAI_SCALE_KAI_TUNING_PROFILE", "local")
    assert (
        PipelineSettings.from_environment(default_include_dir=REPO / "include").kai_tuning_profile == "local"
    )


@pytest.mark.parametrize("value", ["big", "../manifests/kai-tuning/scale", "scale.yaml", "Scale"])
def test_an_unknown_tuning_profile_names_the_variable_and_the_profiles(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("KAI_SCALE_KAI_TUNING_PROFILE", value)
    with pytest.raises(SettingsError) as raised:
        PipelineSettings.from_environment(default_include_dir=REPO / "include")
    assert str(raised.value) == (
        f"KAI_SCALE_KAI_TUNING_PROFILE must name a tuning profile of {REPO}/include/manifests/kai-tuning/ "
        f"(local, local-unprofiled, scale), got {value!r}"
    )


def test_an_include_dir_without_tuning_profiles_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KAI_SCALE_KAI_TUNING_PROFILE", raising=False)
    with pytest.raises(SettingsError, match=r"kai-tuning/ \(none there\), got 'scale'"):
        PipelineSettings.from_environment(default_include_dir=tmp_path)


def test_monitoring_the_cluster_has_of_its_own_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAI_SCALE_SKIP_INSTALLS", "kube-prometheus-stack, pyroscope")
    settings = PipelineSettings.from_environment(default_include_dir=Path("include"))
    assert settings.skip_installs == {"kube-prometheus-stack", "pyroscope"}


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "KAI_SCALE_SKIP_INSTALLS",
            "prometheus",
            "may name kube-prometheus-stack, pyroscope; got prometheus",
        ),
        ("KAI_SCALE_RUNNER_NODE_SELECTOR", "role=system", "is now KAI_SCALE_SYSTEM_NODE_SELECTOR"),
        ("KAI_SCALE_RUNNER_TOLERATIONS", "role=system:NoSchedule", "is now KAI_SCALE_SYSTEM_TOLERATIONS"),
    ],
)
def test_an_unknown_skip_or_an_old_name_is_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=name) as raised:
        PipelineSettings.from_environment(default_include_dir=Path("include"))
    assert message in str(raised.value)


def test_charts_keep_their_values_unless_the_deployment_picks_a_values_profile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KAI_SCALE_CHART_VALUES_PROFILE", raising=False)
    assert (
        PipelineSettings.from_environment(default_include_dir=REPO / "include").chart_values_profile
        == "default"
    )
    monkeypatch.setenv("KAI_SCALE_CHART_VALUES_PROFILE", "local")
    assert (
        PipelineSettings.from_environment(default_include_dir=REPO / "include").chart_values_profile
        == "local"
    )
    monkeypatch.setenv("KAI_SCALE_CHART_VALUES_PROFILE", "small")
    with pytest.raises(SettingsError) as raised:
        PipelineSettings.from_environment(default_include_dir=REPO / "include")
    assert str(raised.value) == (
        "KAI_SCALE_CHART_VALUES_PROFILE must name a chart values profile of "
        f"{REPO}/include/manifests/chart-values/ (default, local), got 'small'"
    )


def test_the_scenarios_are_include_s_unless_the_deployment_mounts_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KAI_SCALE_SCENARIOS_DIR", raising=False)
    settings = PipelineSettings.from_environment(default_include_dir=REPO / "include")
    assert settings.scenarios_dir == REPO / "include" / "scenarios"
    monkeypatch.setenv("KAI_SCALE_SCENARIOS_DIR", str(tmp_path))
    assert PipelineSettings.from_environment(default_include_dir=REPO / "include").scenarios_dir == tmp_path
