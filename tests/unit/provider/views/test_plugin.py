from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from kai_scale.views.plugin import URL_PREFIX, DeferredApp, fastapi_app, nav_entry


def test_the_app_is_built_on_its_first_request_and_only_then() -> None:
    built: list[FastAPI] = []

    def build() -> FastAPI:
        app = FastAPI()
        app.get("/runs")(lambda: {"built": len(built)})
        built.append(app)
        return app

    deferred = DeferredApp(build)
    airflow = FastAPI()
    airflow.mount(URL_PREFIX, deferred)
    assert built == []
    with TestClient(airflow) as client:
        assert client.get(f"{URL_PREFIX}/runs").json() == {"built": 1}
        assert client.get(f"{URL_PREFIX}/runs").json() == {"built": 1}
    assert len(built) == 1


def test_the_nav_entry_frames_the_runs_page_of_the_mounted_app() -> None:
    entry = nav_entry()
    mounted = fastapi_app(dag_id="kai_scale_nightly")
    assert isinstance(mounted["app"], DeferredApp)
    # Relative to Airflow's base URL, which the UI's pages carry as their <base href>.
    assert entry["href"] == f"{mounted['url_prefix'].lstrip('/')}/runs"
    assert (entry["destination"], entry["url_route"]) == ("nav", "scale-tests")
