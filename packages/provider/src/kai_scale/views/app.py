"""The trend view's FastAPI app: the Runs, Trends and One run pages and the JSON their charts load.

Pages are rendered on the server (tables a person can read without JavaScript); each chart is an
empty box that loads its JSON from this app when it scrolls into view and draws it with Apache
ECharts (``static/vendor``, built by ``make view-assets`` from the npm lock). Every route but the
static files asks Airflow whether the user may read the DAG's runs (``authorization``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from kai_scale.profiles.collection import PPROF_SUFFIX, CollectedProfile
from kai_scale.profiles.pprof import ProfileError
from kai_scale.publishing.manifest import ManifestError
from kai_scale.views.reader import ReadError, ResultsReader
from kai_scale.views.run_detail import (
    collected_profile,
    detail_rows,
    metric_charts,
    metric_series,
    profile_rows,
    scenario_rows,
)
from kai_scale.views.runs import RunFilter, RunRow, filter_runs, page_of
from kai_scale.views.trends import PublishedRun, chart_list, runs_in_window, trend

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
# The browser libraries (make view-assets): ECharts draws the charts, D3 with d3-flame-graph the profiles.
BROWSER_LIBRARIES = tuple(
    STATIC_DIR / "vendor" / name for name in ("echarts.min.js", "d3.min.js", "d3-flamegraph.min.js")
)
WINDOW_DAYS = (30, 90)
# The published objects a run page links to, by their field of PublishedKeys.
PUBLISHED_OBJECTS = {
    "results": "results.json",
    "verdicts": "verdicts.json",
    "metrics": "metrics.json",
    "ginkgo_report": "ginkgo-report.json",
}


def _whole_number(text: str | None) -> int | None:
    """A form field's positive whole number; None when it is empty (an HTML form sends empty fields)."""
    return int(text) if text and text.isdigit() and int(text) > 0 else None


def _published(reader: ResultsReader, rows: list[RunRow]) -> list[PublishedRun]:
    def read(row: RunRow) -> PublishedRun:
        return PublishedRun(row=row, results=reader.results(row), verdicts=reader.verdicts(row))

    return reader.each(read, rows)


class _Pages:
    """The routes' shared state: the reader, the templates and where Airflow's own pages are."""

    def __init__(self, *, reader: ResultsReader, dag_id: str) -> None:
        self.reader = reader
        self.dag_id = dag_id
        self.templates = Jinja2Templates(directory=HERE / "templates")
        missing = [str(library) for library in BROWSER_LIBRARIES if not library.exists()]
        self.chart_library_missing = bool(missing)
        if missing:
            log.warning(
                "%s missing: charts will not draw; build them with `make view-assets`", ", ".join(missing)
            )

    def render(self, request: Request, template: str, **context: Any) -> HTMLResponse:
        # root_path is this app's mount point; app_root_path is Airflow's (its [api] base_url path).
        base = request.scope.get("root_path", "")
        airflow = request.scope.get("app_root_path", "")
        return self.templates.TemplateResponse(
            request,
            template,
            {
                "base": base,
                "airflow_run_url": lambda row: (
                    f"{airflow}/dags/{quote(self.dag_id, safe='')}/runs/{quote(row.airflow_run_id, safe='')}"
                    if row.airflow_run_id
                    else None
                ),
                "chart_library_missing": self.chart_library_missing,
                "published_objects": PUBLISHED_OBJECTS.values(),
                **context,
            },
        )

    def run_or_404(self, run_id: str) -> RunRow:
        row = self.reader.run(run_id)
        if row is None:
            raise HTTPException(status_code=404, detail=f"no run {run_id!r} in the manifest")
        return row


def _routes(pages: _Pages) -> APIRouter:
    router = APIRouter()
    reader = pages.reader

    @router.get("/", include_in_schema=False)
    def index(request: Request) -> RedirectResponse:
        return RedirectResponse(f"{request.scope.get('root_path', '')}/runs")

    @router.get("/runs", response_class=HTMLResponse)
    def runs(
        request: Request,
        outcome: str | None = None,
        node_count: str | None = None,
        q: str | None = None,
        page: Annotated[int, Query(ge=1)] = 1,
    ) -> HTMLResponse:
        rows = reader.runs()
        wanted = RunFilter(
            outcome=outcome or None,
            node_count=_whole_number(node_count),
            text=(q or "").strip() or None,
        )
        shown = page_of(filter_runs(rows, wanted), page)
        # The page's entries name their failed scenarios; older ones' results.json are read, at most a page.
        failed = dict(zip(shown.rows, reader.each(reader.failed_scenarios, shown.rows), strict=True))
        query = {
            "outcome": wanted.outcome or "",
            "node_count": wanted.node_count or "",
            "q": wanted.text or "",
        }
        return pages.render(
            request,
            "runs.html",
            page=shown,
            page_url=lambda number: (
                f"{request.scope.get('root_path', '')}/runs?{urlencode({**query, 'page': number})}"
            ),
            failed=failed,
            wanted=wanted,
            total=len(rows),
            outcomes=sorted({row.outcome for row in rows}),
            node_counts=sorted({row.node_count for row in rows if row.node_count is not None}),
        )

    @router.get("/runs/{run_id}", response_class=HTMLResponse)
    def one_run(request: Request, run_id: str) -> HTMLResponse:
        row = pages.run_or_404(run_id)
        results, verdicts, metrics, summary = reader.each(
            lambda read: read(row), [reader.results, reader.verdicts, reader.metrics, reader.summary]
        )
        return pages.render(
            request,
            "run.html",
            row=row,
            verdicts=verdicts,
            scenarios=scenario_rows(summary, verdicts),
            details=detail_rows(results, verdicts),
            charts=metric_charts(metrics),
            profiles=profile_rows(results, verdicts),
            windows={
                name: entry.get("window") for name, entry in ((metrics or {}).get("scenarios") or {}).items()
            },
        )

    @router.get("/runs/{run_id}/objects/{name}")
    def published_object(run_id: str, name: str) -> Response:
        keys = asdict(pages.run_or_404(run_id).keys)
        key = next((keys[field] for field, file in PUBLISHED_OBJECTS.items() if file == name), None)
        if key is None:
            raise HTTPException(
                status_code=404, detail=f"{name!r} is not one of {', '.join(PUBLISHED_OBJECTS.values())}"
            )
        body = reader.object_bytes(key)
        if body is None:
            raise HTTPException(status_code=404, detail=f"s3://{reader.store.bucket}/{key} does not exist")
        return Response(content=body, media_type="application/json")

    @router.get("/trends", response_class=HTMLResponse)
    def trends(
        request: Request,
        node_count: str | None = None,
        days: Annotated[int, Query(ge=1, le=3650)] = WINDOW_DAYS[0],
        last: str | None = None,
    ) -> HTMLResponse:
        rows = reader.runs()
        node_counts = sorted({row.node_count for row in rows if row.node_count is not None})
        # The node count of the newest run unless one is asked for.
        count = _whole_number(node_count) or next((row.node_count for row in rows if row.node_count), None)
        runs_back = _whole_number(last)
        window = (
            runs_in_window(rows, node_count=count, now=datetime.now(UTC), days=days, last=runs_back)
            if count
            else []
        )
        return pages.render(
            request,
            "trends.html",
            node_counts=node_counts,
            node_count=count,
            days=days,
            last=runs_back,
            window_days=WINDOW_DAYS,
            window=window,
            # Which details get a chart is in the results; the verdicts' marks load with each chart.
            charts=chart_list(reader.each(reader.results, window)),
        )

    @router.get("/api/trend")
    def trend_data(
        node_count: Annotated[int, Query(ge=1)],
        test: str,
        detail: str,
        days: Annotated[int, Query(ge=1, le=3650)] = WINDOW_DAYS[0],
        last: str | None = None,
    ) -> dict[str, Any]:
        window = runs_in_window(
            reader.runs(), node_count=node_count, now=datetime.now(UTC), days=days, last=_whole_number(last)
        )
        return asdict(trend(_published(reader, window), test_name=test, detail=detail))

    @router.get("/api/runs/{run_id}/metric")
    def metric_data(run_id: str, scenario: str, name: str) -> dict[str, Any]:
        metrics = reader.metrics(pages.run_or_404(run_id))
        series = metric_series(metrics or {}, scenario=scenario, name=name)
        if series is None:
            raise HTTPException(
                status_code=404, detail=f"run {run_id} has no metric {name!r} of {scenario!r}"
            )
        return series

    return router


def _profile_routes(pages: _Pages) -> APIRouter:
    """A run's profiles: each published pprof file, and its flame graph's tree."""
    router = APIRouter()
    reader = pages.reader

    def published(row: RunRow, scenario: str, profile: str) -> tuple[str, CollectedProfile]:
        """The profile's key and entry; 404 when the run has no such profile."""
        collected = collected_profile(reader.results(row), scenario=scenario, profile=profile)
        if collected is None:
            raise HTTPException(
                status_code=404, detail=f"run {row.run_id} has no {profile!r} profile of {scenario!r}"
            )
        return row.keys.beside(collected.file), collected

    def missing(key: str) -> HTTPException:
        return HTTPException(status_code=404, detail=f"s3://{reader.store.bucket}/{key} does not exist")

    @router.get("/runs/{run_id}/profiles/{scenario}/{file}")
    def profile_download(run_id: str, scenario: str, file: str) -> Response:
        row = pages.run_or_404(run_id)
        if not file.endswith(PPROF_SUFFIX):
            raise HTTPException(status_code=404, detail=f"{file!r} is no profile's file (*{PPROF_SUFFIX})")
        profile = file.removesuffix(PPROF_SUFFIX)
        key, _ = published(row, scenario, profile)
        body = reader.object_bytes(key)
        if body is None:
            raise missing(key)
        # go tool pprof opens it as it is; the name says which run, scenario and profile it is.
        download = f"{row.run_id}-{scenario}-{file}"
        return Response(
            content=body,
            media_type="application/gzip",
            headers={"Content-Disposition": f"attachment; filename*=UTF-8''{quote(download, safe='')}"},
        )

    @router.get("/api/runs/{run_id}/flame")
    def flame_data(run_id: str, scenario: str, profile: str) -> Response:
        row = pages.run_or_404(run_id)
        key, collected = published(row, scenario, profile)
        try:
            graph = reader.flame_graph(row, key, collected.summary.sample_type)
        except ProfileError as error:
            raise HTTPException(
                status_code=422, detail=f"the {profile} profile of {scenario} cannot be drawn: {error}"
            ) from error
        if graph is None:
            raise missing(key)
        # Encoded here: FastAPI's encoder walks the tree in Python, a frame per level.
        return Response(content=json.dumps(graph, separators=(",", ":")), media_type="application/json")

    return router


def create_app(*, reader: ResultsReader, dag_id: str, authorization: Callable[..., Any]) -> FastAPI:
    """The view's app, to be mounted by Airflow's api-server.

    :param reader: reads the published results.
    :param dag_id: the DAG whose runs the results are (links to them; what the user must be allowed to read).
    :param authorization: a FastAPI dependency that refuses users who may not see the runs.
    """
    app = FastAPI(title="KAI scale tests", docs_url=None, redoc_url=None, openapi_url=None)
    pages = _Pages(reader=reader, dag_id=dag_id)
    app.include_router(_routes(pages), dependencies=[Depends(authorization)])
    app.include_router(_profile_routes(pages), dependencies=[Depends(authorization)])
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.exception_handler(ManifestError)
    @app.exception_handler(ReadError)
    async def unreadable(request: Request, error: Exception) -> HTMLResponse:
        response = pages.render(request, "error.html", message=str(error))
        response.status_code = 502
        return response

    return app
