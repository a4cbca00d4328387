"""An HTTP service's Airflow connection (Prometheus', Pyroscope's): its URL, or why there is none. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.sdk import Connection


def base_url(*, conn_type: str | None, host: str | None, port: int | None, schema: str | None) -> str:
    """The service's URL from an Airflow connection's fields, in either form Airflow users write.

    JSON form: ``schema`` is the scheme (HttpHook's convention), ``host`` may be a whole URL. URI form
    (``https://host:port/path``): Airflow puts the scheme in ``conn_type`` and the path in ``schema``.
    """
    host = (host or "").rstrip("/")
    if "://" in host:
        return host
    schemes = ("http", "https")
    # A connection of this provider's types (or http) defaults to plain HTTP, as both services serve.
    scheme = schema if schema in schemes else conn_type if conn_type in schemes else "http"
    path = f"/{schema.strip('/')}" if schema and schema not in schemes else ""
    return f"{scheme}://{host}{f':{port}' if port else ''}{path}"


def connection_url(connection: Connection) -> str:
    """``base_url`` of the connection's fields."""
    return base_url(
        conn_type=connection.conn_type, host=connection.host, port=connection.port, schema=connection.schema
    )


def undefined_connection(conn_id: str, *, service: str) -> str:
    """Why a hook has no client when its connection is not defined, and which variable would define it."""
    return (
        f"Airflow connection {conn_id!r} ({service}) is not defined; set "
        f"AIRFLOW_CONN_{conn_id.upper()} to the {service} URL the workers reach"
    )
