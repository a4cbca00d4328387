from __future__ import annotations

import json

import pytest

from kai_scale.hooks.prometheus import PrometheusHook
from kai_scale.metrics.prometheus_api import PrometheusError, base_url


@pytest.mark.parametrize(
    ("fields", "url"),
    [
        (
            {"conn_type": "http", "host": "127.0.0.1", "port": 29090, "schema": "http"},
            "http://127.0.0.1:29090",
        ),
        ({"conn_type": "http", "host": "prom", "port": None, "schema": "https"}, "https://prom"),
        ({"conn_type": "http", "host": "127.0.0.1", "port": 9090, "schema": ""}, "http://127.0.0.1:9090"),
        # URI form: https://api:6443/api/v1/namespaces/monitoring/services/prometheus-operated:9090/proxy
        (
            {
                "conn_type": "https",
                "host": "api",
                "port": 6443,
                "schema": "api/v1/namespaces/monitoring/services/prometheus-operated:9090/proxy",
            },
            "https://api:6443/api/v1/namespaces/monitoring/services/prometheus-operated:9090/proxy",
        ),
        (
            {"conn_type": "http", "host": "https://proxy.example/prom/", "port": None, "schema": None},
            "https://proxy.example/prom",
        ),
    ],
)
def test_base_url_from_either_connection_form(fields: dict[str, object], url: str) -> None:
    assert base_url(**fields) == url  # type: ignore[arg-type]


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
