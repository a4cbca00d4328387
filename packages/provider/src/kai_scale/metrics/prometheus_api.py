"""A small client of Prometheus' HTTP API: range and instant queries, errors in plain words.

No Airflow here: the connection type that builds it is ``kai_scale.hooks.prometheus.PrometheusHook``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx

# Connection failures are retried by the transport; a query that errors is not retried.
CONNECT_RETRIES = 3


class PrometheusError(RuntimeError):
    """Prometheus could not be reached or refused a query; the message says which and why."""


@dataclass(frozen=True, kw_only=True)
class Series:
    """One series of a query's result."""

    labels: dict[str, str]
    """The series' labels (``__name__`` included when Prometheus returns it)."""
    points: list[tuple[float, float]]
    """(unix time, value) pairs; NaN and infinities kept as Prometheus sent them."""


class PrometheusClient:
    """Range and instant queries against one Prometheus.

    :param base_url: e.g. ``http://prometheus.monitoring:9090`` or an API server service-proxy URL.
    :param bearer_token: sent as ``Authorization: Bearer`` when set (e.g. through a service proxy).
    :param timeout_seconds: per request.
    """

    def __init__(
        self, base_url: str, *, bearer_token: str | None = None, timeout_seconds: float = 30
    ) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {bearer_token}"} if bearer_token else {}
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout_seconds,
            transport=httpx.HTTPTransport(retries=CONNECT_RETRIES),
        )

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *_: object) -> None:
        self._http.close()

    def check(self) -> None:
        """Raise PrometheusError unless Prometheus answers (one request, before many queries)."""
        self._get("/api/v1/status/buildinfo", {}, query="(build info)")

    def query_range(self, query: str, *, start: datetime, end: datetime, step: timedelta) -> list[Series]:
        """The series of ``query`` from ``start`` to ``end`` at ``step`` resolution."""
        data = self._get(
            "/api/v1/query_range",
            {
                "query": query,
                "start": start.timestamp(),
                "end": end.timestamp(),
                "step": step.total_seconds(),
            },
            query=query,
        )
        return [_series(item, item.get("values", [])) for item in data.get("result", [])]

    def query(self, query: str, *, at: datetime) -> list[Series]:
        """The instant value of ``query`` at ``at`` (one point per series)."""
        data = self._get("/api/v1/query", {"query": query, "time": at.timestamp()}, query=query)
        if data.get("resultType") == "scalar":
            return [_series({}, [data["result"]])]
        return [_series(item, [item["value"]]) for item in data.get("result", []) if "value" in item]

    def _get(self, path: str, params: dict[str, Any], *, query: str) -> dict[str, Any]:
        try:
            response = self._http.get(path, params=params)
        except httpx.HTTPError as error:
            raise PrometheusError(f"Prometheus at {self.base_url} is unreachable: {error}") from error
        try:
            body = response.json()
        except ValueError:
            raise PrometheusError(
                f"Prometheus at {self.base_url} answered HTTP {response.status_code} without JSON "
                f"(is the URL right?): {response.text[:200]!r}"
            ) from None
        if response.status_code != httpx.codes.OK or body.get("status") != "success":
            raise PrometheusError(
                f"Prometheus at {self.base_url} refused query {query!r}: "
                f"{body.get('errorType', response.status_code)}: {body.get('error', 'no error message')}"
            )
        return dict(body.get("data", {}))


def _series(item: dict[str, Any], points: list[list[Any]]) -> Series:
    return Series(
        labels=dict(item.get("metric", {})),
        points=[(float(time), float(value)) for time, value in points],
    )
