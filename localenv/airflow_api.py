"""Airflow's REST API (v2) as a user of the local deployment calls it: make demo, the tests, benchmarks."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

from kai_scale_model.waiting import Deadline
from localenv.processes import ComponentError

# The first user values-local.yaml gives the chart's create-user job.
ADMIN_USER = "admin"
# The local deployment's, its UI served on loopback only.
ADMIN_PASSWORD = "admin"
# How long the REST client waits for an api-server that does not answer (a restarting pod).
RECONNECT_SECONDS = 180


@dataclass
class AirflowApi:
    """Airflow's REST API (v2) as a user of the deployment calls it, logged in as ``user``."""

    base_url: str
    user: str = ADMIN_USER
    password: str = ADMIN_PASSWORD

    def __post_init__(self) -> None:
        self._client = httpx.Client(base_url=self.base_url, timeout=60)
        self._token: str | None = None

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    @property
    def token(self) -> str | None:
        """The access token of the last login."""
        return self._token

    def login(self) -> None:
        """A token of the auth manager (FAB's /auth/token) for the calls after it."""
        answer = self._client.post("/auth/token", json={"username": self.user, "password": self.password})
        if answer.status_code not in (200, 201):
            failure = f"{answer.status_code} {answer.text[:300]}"
            raise ComponentError(f"airflow: logging in as {self.user} failed: {failure}")
        self._token = answer.json()["access_token"]

    def request(self, method: str, path: str, **options: Any) -> httpx.Response:
        """A call to ``/api/v2<path>``; logs in first, and again once when the token expired.

        A connection that fails is tried again for up to ``RECONNECT_SECONDS``: the api-server's pod may
        be restarting (an upgrade), and the UI's port-forward then follows its successor. A call that
        may have reached the server (any error but a refused connection) is tried again only if it
        reads: a trigger sent twice would start two runs.
        """
        deadline = Deadline(seconds=RECONNECT_SECONDS)
        while True:
            try:
                return self._request(method, path, **options)
            except httpx.TransportError as error:
                unsent = isinstance(error, httpx.ConnectError)
                if deadline.passed() or not (unsent or method == "GET"):
                    raise
                time.sleep(2)

    def _request(self, method: str, path: str, **options: Any) -> httpx.Response:
        if self._token is None:
            self.login()
        headers = {**options.pop("headers", {}), "Authorization": f"Bearer {self._token}"}
        answer = self._client.request(method, f"/api/v2{path}", headers=headers, **options)
        if answer.status_code == 401:
            self.login()
            headers["Authorization"] = f"Bearer {self._token}"
            answer = self._client.request(method, f"/api/v2{path}", headers=headers, **options)
        return answer

    def get(self, path: str, **options: Any) -> Any:
        """The JSON of a GET that must succeed."""
        answer = self.request("GET", path, **options)
        if answer.status_code != 200:
            raise ComponentError(f"airflow: GET {path}: {answer.status_code} {answer.text[:300]}")
        return answer.json()
