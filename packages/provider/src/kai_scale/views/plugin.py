"""What the Airflow plugin registers: the view's FastAPI app and its "Scale tests" entry in Airflow's nav.

Airflow imports its plugins in every process that loads them (scheduler, dag-processor, each task),
while only the api-server serves the view; so this module imports neither FastAPI nor Airflow's API
security. The app is built on the first request the api-server hands it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import Receive, Scope, Send

URL_PREFIX = "/scale-tests"
"""Where the api-server mounts the app."""
UI_ROUTE = "scale-tests"
"""Airflow's UI shows the view at ``/plugin/<UI_ROUTE>``, the app's page in a frame."""


class DeferredApp:
    """An ASGI app that builds the real one on its first call.

    :param build: makes the app (called once).
    """

    def __init__(self, build: Callable[[], FastAPI]) -> None:
        self._build = build
        self._app: FastAPI | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Hand the call to the app, built first if this is the first call."""
        # One event loop serves the requests, and building awaits nothing: it runs once.
        if self._app is None:
            self._app = self._build()
        await self._app(scope, receive, send)


def build_app(*, dag_id: str) -> FastAPI:
    """The view on the results bucket of this deployment's settings, behind Airflow's authorization.

    A user sees the published runs when Airflow lets them see the DAG's runs (``GET`` on its DAG runs),
    whichever way they authenticate to the rest of Airflow's API (the UI's session, a bearer token).
    """
    from airflow.api_fastapi.auth.managers.models.resource_details import (  # noqa: PLC0415 - see module doc
        DagAccessEntity,
    )
    from airflow.api_fastapi.core_api.security import requires_access_dag  # noqa: PLC0415

    from kai_scale.hooks.results_bucket import ResultsBucketHook  # noqa: PLC0415
    from kai_scale.settings import ResultsLocation  # noqa: PLC0415
    from kai_scale.views.app import create_app  # noqa: PLC0415
    from kai_scale.views.reader import ResultsReader  # noqa: PLC0415

    location = ResultsLocation.from_environment()
    store = ResultsBucketHook(aws_conn_id=location.aws_conn_id, bucket=location.bucket)
    return create_app(
        reader=ResultsReader(store=store, prefix=location.prefix),
        dag_id=dag_id,
        authorization=requires_access_dag("GET", DagAccessEntity.RUN, param_dag_id=dag_id),
    )


def fastapi_app(*, dag_id: str) -> dict[str, Any]:
    """The plugin's ``fastapi_apps`` entry: the view of ``dag_id``'s published runs."""
    return {
        "app": DeferredApp(lambda: build_app(dag_id=dag_id)),
        "url_prefix": URL_PREFIX,
        "name": "KAI scale tests",
    }


def nav_entry() -> dict[str, Any]:
    """The plugin's ``external_views`` entry: "Scale tests" in Airflow's nav, the Runs page in its frame.

    Paths are relative, so they resolve under Airflow's ``[api] base_url`` wherever it is served.
    """
    return {
        "name": "Scale tests",
        "href": f"{URL_PREFIX.lstrip('/')}/runs",
        "url_route": UI_ROUTE,
        "destination": "nav",
        "nav_top_level": True,
        "icon": f"{URL_PREFIX.lstrip('/')}/static/icon.svg",
    }
