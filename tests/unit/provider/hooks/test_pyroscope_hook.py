"""PyroscopeHook: an Airflow connection made a Pyroscope client, or an error naming what to set."""

from __future__ import annotations

import json

import pytest

from kai_scale.hooks.pyroscope import PyroscopeHook
from kai_scale.profiles.pyroscope_api import PyroscopeError


def test_a_pyroscope_connection_gives_a_client_of_its_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_PYRO_TEST",
        json.dumps(
            {"conn_type": "pyroscope", "host": "pyroscope.monitoring.svc", "port": 4040, "password": "t"}
        ),
    )
    with PyroscopeHook(pyroscope_conn_id="pyro_test").get_conn() as client:
        assert client.base_url == "http://pyroscope.monitoring.svc:4040"
        assert client._http.headers["Authorization"] == "Bearer t"


def test_a_missing_connection_says_which_variable_to_set_and_that_no_query_can_succeed() -> None:
    with pytest.raises(
        PyroscopeError, match="set AIRFLOW_CONN_NO_SUCH_PYROSCOPE to the Pyroscope URL"
    ) as failed:
        PyroscopeHook(pyroscope_conn_id="no_such_pyroscope").get_conn()
    assert failed.value.unreachable
