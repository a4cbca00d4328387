"""Test session settings: Airflow runs from a throw-away home, on this repository's DAGs and plugins.

It has no metadata database: the tests parse the DAG and load the plugins with it, and every night
runs on the deployed Airflow (tests/integration/airflow_deployment).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Set before anything imports Airflow: it reads its configuration once, at import.
_AIRFLOW_HOME = tempfile.mkdtemp(prefix="kai-scale-airflow-")
os.environ["AIRFLOW_HOME"] = _AIRFLOW_HOME
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(REPO / "plugins")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "False"


@pytest.fixture(scope="session", autouse=True)
def _remove_airflow_home() -> Iterator[None]:
    yield
    shutil.rmtree(_AIRFLOW_HOME, ignore_errors=True)


# Every deployment setting of the alerts (kai_scale.settings.AlertSettings), written out here so the
# tests check the names a deployment uses rather than the code's own list.
ALERT_VARIABLES = (
    "KAI_SCALE_ALERT_EMAIL_TO",
    "KAI_SCALE_ALERT_EMAIL_FROM",
    "KAI_SCALE_ALERT_SMTP_CONN_ID",
    "KAI_SCALE_ALERT_WEBHOOK_CONN_ID",
    "KAI_SCALE_RUN_ALERT_AFTER",
    "KAI_SCALE_RESULTS_URL",
)
