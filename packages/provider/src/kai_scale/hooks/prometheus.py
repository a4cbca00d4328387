"""The Prometheus connection type: an Airflow connection that builds a ``PrometheusClient``."""

from __future__ import annotations

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from kai_scale.hooks.service_url import connection_url, undefined_connection
from kai_scale.metrics.prometheus_api import PrometheusClient, PrometheusError


class PrometheusHook(BaseHook):
    """The Prometheus that watches the target cluster, as an Airflow connection of type ``prometheus``.

    The connection's host is Prometheus' URL (or a host, with port and scheme), its schema a path
    prefix such as an API server's service proxy, its password a bearer token; see ``base_url``. The
    connection form is declared in the provider's info (``kai_scale.get_provider_info``).

    :param prometheus_conn_id: the Airflow connection.
    """

    conn_name_attr = "prometheus_conn_id"
    default_conn_name = "prometheus_default"
    conn_type = "prometheus"
    hook_name = "Prometheus"

    def __init__(self, *, prometheus_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.prometheus_conn_id = prometheus_conn_id

    def get_conn(self) -> PrometheusClient:
        """A client of the connection's Prometheus; PrometheusError when the connection is missing."""
        try:
            connection = self.get_connection(self.prometheus_conn_id)
        except AirflowNotFoundException as error:
            raise PrometheusError(
                undefined_connection(self.prometheus_conn_id, service="Prometheus")
            ) from error
        return PrometheusClient(connection_url(connection), bearer_token=connection.password or None)
