"""PrometheusHook: an Airflow connection made a Prometheus client, or an error naming what to set."""

from __future__ import annotations

import json

import pytest

from kai_scale.hooks.prometheus import PrometheusHook
from kai_scale.metrics.prometheus_api import PrometheusError


def test_a_prometheus_connection_gives_a_client_of_its_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_PROM_TEST",
        json.dumps({"conn_type": "prometheus", "host": "prom.monitoring", "port": 9090, "password": "t0ken"}),
    )
    with PrometheusHook(prometheus_conn_id="prom_test").get_conn() as client:
        assert client.base_url == "http://prom.monitoring:9090"
        assert client._http.headers["Authorization"] == "Bearer t0ken"


def test_a_missing_connection_says_which_variable_to_set() -> None:
    with pytest.raises(PrometheusError, match="AIRFLOW_CONN_NO_SUCH_PROMETHEUS to the Prometheus URL"):
        PrometheusHook(prometheus_conn_id="no_such_prometheus").get_conn()
