"""The overdue alert's deadline, as Airflow stores it, read back as the clear of its run must read it.

The move itself runs on the deployment: the fourth night clears its teardown while its overdue alert is
pending and reads the deadline moved (tests/integration/airflow_deployment).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import airflow
import pytest
from airflow.models import taskinstance
from airflow.models.deadline_alert import DeadlineAlert as DeadlineAlertModel
from airflow.serialization.encoders import encode_deadline_alert

from kai_scale.alerts import deadline_clear
from kai_scale.alerts.wiring import alert_wiring
from kai_scale.settings import PipelineSettings


def _stored_deadline(monkeypatch: pytest.MonkeyPatch, run_alert_after: str) -> DeadlineAlertModel:
    """The DAG's one deadline alert (mail, a run-time limit) as Airflow stores it."""
    monkeypatch.setenv("KAI_SCALE_ALERT_EMAIL_TO", "kai-oncall@example.com")
    monkeypatch.setenv("KAI_SCALE_RUN_ALERT_AFTER", run_alert_after)
    settings = PipelineSettings.from_environment(default_include_dir=Path("include"))
    (alert,) = alert_wiring(settings).dag_arguments["deadline"]
    encoded = encode_deadline_alert(alert)
    return DeadlineAlertModel(
        reference=encoded["reference"], interval=encoded["interval"], callback_def=encoded["callback"]
    )


def test_the_overdue_deadline_is_read_as_its_interval_which_airflow_stores_as_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stored = _stored_deadline(monkeypatch, "6h")
    assert isinstance(stored.interval, dict), "what Airflow 3.3's move reads as seconds"
    assert deadline_clear.queued_at_interval(stored) == timedelta(hours=6)


def test_the_pinned_airflow_has_the_bug_so_the_plugin_replaces_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """When this fails after an upgrade, check whether apache/airflow#70368 is fixed in it."""
    assert airflow.__version__ in deadline_clear.AFFECTED_AIRFLOW_VERSIONS
    monkeypatch.setattr(taskinstance, "_recalculate_dagrun_queued_at_deadlines", None)
    assert deadline_clear.install()
    assert taskinstance._recalculate_dagrun_queued_at_deadlines is deadline_clear.move_queued_at_deadlines


def test_another_airflow_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(airflow, "__version__", "3.4.0")
    monkeypatch.setattr(taskinstance, "_recalculate_dagrun_queued_at_deadlines", None)
    assert not deadline_clear.install()
    assert taskinstance._recalculate_dagrun_queued_at_deadlines is None
