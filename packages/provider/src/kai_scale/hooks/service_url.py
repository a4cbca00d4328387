"""An HTTP service's URL from an Airflow connection's fields (Prometheus', Pyroscope's). Pure."""

from __future__ import annotations


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
