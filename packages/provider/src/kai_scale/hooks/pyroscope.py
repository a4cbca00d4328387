"""The Pyroscope connection type: an Airflow connection that builds a ``PyroscopeClient``."""

from __future__ import annotations

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from kai_scale.hooks.service_url import connection_url, undefined_connection
from kai_scale.profiles.pyroscope_api import PyroscopeClient, PyroscopeError


class PyroscopeHook(BaseHook):
    """The Pyroscope KAI's scheduler pushes its profiles to, as an Airflow connection of type ``pyroscope``.

    The connection's fields mean what they mean for ``PrometheusHook``: host is Pyroscope's URL (or a
    host, with port and scheme), schema a path prefix such as an API server's service proxy, password a
    bearer token.

    :param pyroscope_conn_id: the Airflow connection.
    """

    conn_name_attr = "pyroscope_conn_id"
    default_conn_name = "pyroscope_default"
    conn_type = "pyroscope"
    hook_name = "Pyroscope"

    def __init__(self, *, pyroscope_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.pyroscope_conn_id = pyroscope_conn_id

    def get_conn(self) -> PyroscopeClient:
        """A client of the connection's Pyroscope; PyroscopeError when the connection is missing."""
        try:
            connection = self.get_connection(self.pyroscope_conn_id)
        except AirflowNotFoundException as error:
            raise PyroscopeError(
                undefined_connection(self.pyroscope_conn_id, service="Pyroscope"), unreachable=True
            ) from error
        except Exception as error:  # profiles never fail a run: whatever is wrong is said
            raise PyroscopeError(
                f"Airflow connection {self.pyroscope_conn_id!r} (Pyroscope) cannot be read: {error}",
                unreachable=True,
            ) from error
        return PyroscopeClient(connection_url(connection), bearer_token=connection.password or None)
