from __future__ import annotations

import pytest

from kai_scale.hooks.service_url import base_url


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
