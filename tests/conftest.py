"""Test session settings: Airflow runs from a throw-away home, on this repository's DAGs and plugins.

Its metadata database is a database of its own on the local environment's PostgreSQL, as the
deployment's is (``tests/integration``'s ``airflow_db`` creates it); nothing connects before that.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from localenv import postgres
from localenv.settings import Ports

REPO = Path(__file__).resolve().parents[1]
TESTS_DATABASE = "airflow_tests"

# Set before anything imports Airflow: it reads its configuration once, at import.
_AIRFLOW_HOME = tempfile.mkdtemp(prefix="kai-scale-airflow-")
os.environ["AIRFLOW_HOME"] = _AIRFLOW_HOME
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(REPO / "plugins")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "False"
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = postgres.url(
    host="127.0.0.1", port=Ports.from_environment().postgres, database=TESTS_DATABASE
)
# The deployment setting docs/reliability.md asks for: Kubernetes API calls of the pod operator
# retried for about 90 s, so an API server restart does not fail a running scenario.
os.environ["AIRFLOW__WORKERS__API_RETRIES"] = "10"


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
