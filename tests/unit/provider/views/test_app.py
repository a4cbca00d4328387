"""The view's pages and chart data in-process, mounted as Airflow's api-server mounts it."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient

from kai_scale.metrics.collection import Window
from kai_scale.profiles.collection import ProfileType, collect_scenario
from kai_scale.verdicts.document import ProfileVerdict
from kai_scale.verdicts.profile_comparison import compare_cpu_profiles
from kai_scale.views import app as app_module
from kai_scale.views.app import create_app
from kai_scale.views.reader import ResultsReader
from tests.unit.provider.profiles.builder import HEAP, HEAVY1, HEAVY3, fixture
from tests.unit.provider.views.stores import CountingStore

FILL = "Fill Cluster with single GPU Jobs"


def _entry(day: int, **fields: Any) -> dict[str, Any]:
    run_id = f"202611{day:02d}T020000Z-scheduled-{day:08x}"
    return {
        "timestamp": f"2026-11-{day:02d}T02:00:00Z",
        "path": f"Public/{run_id}/results.json",
        "commit": f"c0ffee{day:02d}",
        "run_id": run_id,
        "airflow_run_id": f"scheduled__2026-11-{day:02d}T02:00:00+00:00",
        "node_count": 500,
        "kai_ref": "v0.9.0",
        "status": "success",
        "verdict": "pass",
        "failed_scenarios": [],
    } | fields


def _results(time: str, *failed: str) -> dict[str, Any]:
    tests = [{"test_name": FILL, "status": "success", "details": {"nodes": 500, "time": time}}]
    tests += [
        {"test_name": name, "status": "failure", "details": {"scenario": name, "message": "m"}}
        for name in failed
    ]
    return {"metadata": {}, "results": {"status": "failure" if failed else "success", "tests": tests}}


ENTRIES = [
    _entry(20),
    _entry(21, status="failure", verdict="failure", failed_scenarios=["reclaim"]),
    _entry(22, verdict="regression"),
]
RUN_IDS = [entry["run_id"] for entry in ENTRIES]


@pytest.fixture
def store() -> CountingStore:
    store = CountingStore()
    store.put("Public/manifest.json", {"runs": ENTRIES})
    for entry, results in zip(
        ENTRIES, [_results("6m30s"), _results("6m31s", "reclaim"), _results("8m")], strict=True
    ):
        store.put(entry["path"], results)
    store.put(
        f"runs/{RUN_IDS[1]}/run-summary.json",
        {
            "scenarios": [
                {"scenario": "reclaim", "status": "failure", "reason": "pods pending", "try_number": 2}
            ]
        },
    )
    return store


def _allowed() -> None:
    return None


def _client(store: CountingStore, authorization: Callable[..., Any] = _allowed) -> TestClient:
    """The app under /scale-tests of an app served under /airflow, as the api-server with a base_url path."""
    view = create_app(
        reader=ResultsReader(store=store, prefix="Public/"),
        dag_id="kai_scale_nightly",
        authorization=authorization,
    )
    airflow = FastAPI(root_path="/airflow")
    airflow.mount("/scale-tests", view)
    return TestClient(airflow)


@pytest.fixture
def client(store: CountingStore) -> Iterator[TestClient]:
    with _client(store) as client:
        yield client


def test_the_runs_page_lists_the_runs_newest_first_with_their_links(client: TestClient) -> None:
    page = client.get("/airflow/scale-tests/runs").text
    assert [page.index(f'data-run-id="{run_id}"') for run_id in RUN_IDS[::-1]] == sorted(
        page.index(f'data-run-id="{run_id}"') for run_id in RUN_IDS
    )
    assert '<td class="failed">reclaim</td>' in page
    assert f'href="/airflow/scale-tests/runs/{RUN_IDS[0]}/objects/results.json"' in page
    assert (
        'href="/airflow/dags/kai_scale_nightly/runs/scheduled__2026-11-20T02%3A00%3A00%2B00%3A00"' in page
    ), "Airflow's run page, under Airflow's base path"
    assert "3 of 3 runs" in page


def test_the_runs_page_takes_the_filters_as_a_form_sends_them(
    client: TestClient, store: CountingStore
) -> None:
    page = client.get(
        "/airflow/scale-tests/runs", params={"outcome": "", "node_count": "", "q": "RECLAIM"}
    ).text
    assert "1 of 3 runs" in page
    assert f'data-run-id="{RUN_IDS[1]}"' in page
    assert '<td class="failed">reclaim</td>' in page
    assert store.reads == {"Public/manifest.json": 1}, "searched and shown from the manifest alone"
    assert "1 of 3 runs" in client.get("/airflow/scale-tests/runs", params={"outcome": "regression"}).text
    assert "0 of 3 runs" in client.get("/airflow/scale-tests/runs", params={"node_count": "100"}).text


def test_an_older_entry_without_failed_scenarios_shows_its_results_ones_but_is_not_searched_by_them(
    client: TestClient, store: CountingStore
) -> None:
    older = [{key: value for key, value in entry.items() if key != "failed_scenarios"} for entry in ENTRIES]
    store.put("Public/manifest.json", {"runs": older})
    page = client.get("/airflow/scale-tests/runs").text
    assert '<td class="failed">reclaim</td>' in page
    assert ENTRIES[1]["path"] in store.reads, "read for the page it is on"
    assert "0 of 3 runs" in client.get("/airflow/scale-tests/runs", params={"q": "reclaim"}).text


def test_an_incomplete_run_and_a_failure_of_the_pipeline_are_shown_as_such(
    client: TestClient, store: CountingStore
) -> None:
    incomplete = _entry(
        23,
        status="incomplete",
        verdict="incomplete",
        failure_kind=None,
        not_run_scenarios=["sanity-fill-cluster", "reclaim"],
    )
    setup_failed = _entry(
        24,
        status="failure",
        verdict="failure",
        failure_kind="infrastructure",
        failed_scenarios=["reclaim"],
        not_run_scenarios=[],
    )
    store.put("Public/manifest.json", {"runs": [*ENTRIES, incomplete, setup_failed]})
    store.put(
        f"runs/{incomplete['run_id']}/run-summary.json",
        {
            "status": "incomplete",
            "scenarios": [
                {"scenario": "reclaim", "status": "not_run", "reason": "KAI not installed", "try_number": 1}
            ],
        },
    )
    runs = client.get("/airflow/scale-tests/runs").text
    assert '<span class="outcome outcome-incomplete">incomplete</span>' in runs
    assert '<span class="not-run">not run: sanity-fill-cluster, reclaim</span>' in runs
    assert (
        '<span class="outcome outcome-failure">failure</span> <span class="kind">infrastructure</span>'
        in runs
    )
    run = client.get(f"/airflow/scale-tests/runs/{incomplete['run_id']}").text
    assert '<span class="outcome outcome-not_run">not_run</span>' in run
    assert "KAI not installed" in run
    assert (
        "<dd>failure (infrastructure)</dd>"
        in client.get(f"/airflow/scale-tests/runs/{setup_failed['run_id']}").text
    )


def test_a_run_page_shows_its_scenarios_or_says_it_has_no_summary(client: TestClient) -> None:
    failed = client.get(f"/airflow/scale-tests/runs/{RUN_IDS[1]}").text
    assert 'data-scenario="reclaim"' in failed
    assert "pods pending" in failed
    passed = client.get(f"/airflow/scale-tests/runs/{RUN_IDS[0]}").text
    assert f"This run has no run summary (<code>runs/{RUN_IDS[0]}/run-summary.json</code>)" in passed
    assert client.get("/airflow/scale-tests/runs/no-such-run").status_code == 404


def test_a_runs_published_objects_are_served_from_the_bucket(
    client: TestClient, store: CountingStore
) -> None:
    answer = client.get(f"/airflow/scale-tests/runs/{RUN_IDS[2]}/objects/results.json")
    assert (answer.status_code, answer.json()) == (200, _results("8m"))
    assert answer.headers["content-type"] == "application/json"
    missing = client.get(f"/airflow/scale-tests/runs/{RUN_IDS[2]}/objects/ginkgo-report.json")
    assert missing.status_code == 404
    assert f"s3://kai-scale-results/Public/{RUN_IDS[2]}/ginkgo-report.json does not exist" in missing.text
    assert client.get(f"/airflow/scale-tests/runs/{RUN_IDS[2]}/objects/..%2Fmanifest.json").status_code == 404
    assert client.get(f"/airflow/scale-tests/runs/{RUN_IDS[2]}/objects/run-summary.json").status_code == 404


def test_the_trends_page_lists_a_chart_per_changing_detail_and_serves_its_data(
    client: TestClient, store: CountingStore
) -> None:
    page = client.get("/airflow/scale-tests/trends", params={"days": 3650, "last": ""}).text
    assert "3 runs at 500 nodes" in page
    assert f"{FILL} · nodes = 500" in page
    assert page.count('class="chart"') == 1
    assert sorted(store.reads) == sorted(["Public/manifest.json", *(entry["path"] for entry in ENTRIES)]), (
        "the manifest and the results, not the verdicts"
    )
    data = client.get(
        "/airflow/scale-tests/api/trend",
        params={"node_count": 500, "days": 3650, "test": FILL, "detail": "time"},
    ).json()
    assert [point["value"] for point in data["points"]] == [390.0, 391.0, 480.0]
    assert [failure["run_id"] for failure in data["failures"]] == [RUN_IDS[1]]
    assert (
        client.get(
            "/airflow/scale-tests/api/trend",
            params={"node_count": 500, "test": FILL, "detail": "time", "last": "2"},
        ).json()["points"][0]["run_id"]
        == RUN_IDS[1]
    )


def test_a_missing_metric_is_a_404(client: TestClient) -> None:
    answer = client.get(
        f"/airflow/scale-tests/api/runs/{RUN_IDS[0]}/metric", params={"scenario": "s", "name": "q"}
    )
    assert answer.status_code == 404


def test_every_page_and_its_data_asks_the_authorization(store: CountingStore) -> None:
    def refuse() -> None:
        raise HTTPException(status_code=403, detail="Forbidden")

    with _client(store, authorization=refuse) as client:
        for path in (
            "/airflow/scale-tests/",
            "/airflow/scale-tests/runs",
            f"/airflow/scale-tests/runs/{RUN_IDS[0]}",
            f"/airflow/scale-tests/runs/{RUN_IDS[0]}/objects/results.json",
            "/airflow/scale-tests/trends",
            "/airflow/scale-tests/api/trend?node_count=500&test=t&detail=d",
            f"/airflow/scale-tests/api/runs/{RUN_IDS[0]}/metric?scenario=s&name=q",
        ):
            assert client.get(path).status_code == 403, path
        # Like Airflow's own assets, the page's script is not behind the login.
        assert client.get("/airflow/scale-tests/static/views.js").status_code == 200
    assert store.reads == {}, "nothing is read for a refused user"


def test_an_unreadable_history_is_a_page_that_says_why(store: CountingStore, client: TestClient) -> None:
    store.objects["Public/manifest.json"] = b'{"runs": 3}'
    answer = client.get("/airflow/scale-tests/runs")
    assert answer.status_code == 502
    assert "Public/manifest.json is not a manifest" in answer.text


@pytest.mark.parametrize("missing", range(len(app_module.BROWSER_LIBRARIES)))
def test_without_a_chart_library_the_pages_say_how_to_build_it(
    store: CountingStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, missing: int
) -> None:
    libraries = list(app_module.BROWSER_LIBRARIES)
    libraries[missing] = tmp_path / libraries[missing].name
    monkeypatch.setattr(app_module, "BROWSER_LIBRARIES", tuple(libraries))
    with _client(store) as client:
        page = client.get("/airflow/scale-tests/runs").text
    assert "<code>make view-assets</code>" in page
    assert f'data-run-id="{RUN_IDS[0]}"' in page, "the tables work without it"


def test_each_page_loads_only_the_chart_libraries_it_draws_with(client: TestClient) -> None:
    def libraries(path: str) -> set[str]:
        return set(re.findall(r'/static/vendor/([\w.-]+)"', client.get(path).text))

    assert libraries("/airflow/scale-tests/runs") == set()
    assert libraries("/airflow/scale-tests/trends") == {"echarts.min.js"}
    flame = {"d3-flamegraph.css", "d3.min.js", "d3-flamegraph.min.js"}
    assert libraries(f"/airflow/scale-tests/runs/{RUN_IDS[0]}") == {"echarts.min.js", *flame}


PROFILED = RUN_IDS[2]
WINDOW = Window(
    start=datetime(2026, 11, 22, 2, tzinfo=UTC), end=datetime(2026, 11, 22, 2, 3, tzinfo=UTC), source="runner"
)


@pytest.fixture
def profiled(store: CountingStore) -> CountingStore:
    """The newest run with profiles of one scenario, published as the pipeline publishes them.

    The Go runtime's own profiles stand for Pyroscope's answers (no allocation profile in the window);
    the verdicts compared its CPU profile with its previous run's and flagged the scenario.
    """

    def fetch(profile_type: ProfileType, window: Window) -> bytes:
        answers = {"cpu": HEAVY1, "inuse_space": HEAP}
        path = answers.get(profile_type.sample_type)
        return gzip.decompress(path.read_bytes()) if path else b""

    collected = collect_scenario(fetch, scenario="fill", service="kai-scheduler", window=WINDOW)
    results = _results("8m") | {"profiles": {"fill": collected.entry.model_dump(mode="json")}}
    store.put(ENTRIES[2]["path"], results)
    for file, body in collected.files.items():
        store.objects[f"Public/{PROFILED}/{file}"] = body
    comparison = compare_cpu_profiles(
        run=fixture(HEAVY1),
        baseline=fixture(HEAVY3),
        baseline_run_id=RUN_IDS[0],
        run_pods=100,
        baseline_pods=100,
    )
    verdict = ProfileVerdict(comparison=comparison, reason=None, flagged=True)
    store.put(f"Public/{PROFILED}/verdicts.json", {"profiles": {"fill": verdict.model_dump(mode="json")}})
    return store


def test_a_run_page_shows_each_scenarios_top_functions_its_comparison_and_its_profiles(
    profiled: CountingStore, client: TestClient
) -> None:
    page = client.get(f"/airflow/scale-tests/runs/{PROFILED}").text
    profiles = page[page.index("Profiles of KAI's scheduler") : page.index("Prometheus metrics")]
    assert '<span class="outcome outcome-partial">partial</span>' in profiles
    assert "not collected: alloc_space" in profiles
    assert "Missing: no samples of kai-scheduler in the window" in profiles
    assert f'CPU against <a class="run-link" href="/airflow/scale-tests/runs/{RUN_IDS[0]}">' in profiles
    assert '<div class="profile-comparison flagged"' in profiles
    assert "(the scenario is flagged)" in profiles
    grew = profiles[profiles.index('<tr class="grew">') :]
    assert grew.startswith('<tr class="grew"><td><code>main.light</code></td>'), "what grew most first"
    for profile in ("cpu", "inuse_space"):
        assert (
            f'href="/airflow/scale-tests/runs/{PROFILED}/profiles/fill/{profile}.pb.gz">{profile}.pb.gz</a>'
            in profiles
        )
        assert (
            f'data-src="/airflow/scale-tests/api/runs/{PROFILED}/flame?scenario=fill&amp;profile={profile}"'
            in profiles
        )
    assert 'cpu <span class="detail">· 1.2 s of CPU</span>' in profiles
    assert 'inuse_space <span class="detail">· 4.0 MiB</span>' in profiles
    assert "<code>main.heavy</code>" in profiles, "the CPU profile's top functions"
    assert "<code>main.allocate</code>" in profiles, "the in-use profile's"


def test_a_profile_downloads_as_published_and_draws_as_a_flame_graph(
    profiled: CountingStore, client: TestClient
) -> None:
    download = client.get(f"/airflow/scale-tests/runs/{PROFILED}/profiles/fill/cpu.pb.gz")
    assert download.status_code == 200
    assert download.content == profiled.objects[f"Public/{PROFILED}/profiles/fill/cpu.pb.gz"]
    assert (
        download.headers["content-disposition"] == f"attachment; filename*=UTF-8''{PROFILED}-fill-cpu.pb.gz"
    )
    graph = client.get(
        f"/airflow/scale-tests/api/runs/{PROFILED}/flame", params={"scenario": "fill", "profile": "cpu"}
    )
    assert graph.status_code == 200
    body = graph.json()
    assert (body["sample_type"], body["unit"]) == ("cpu", "nanoseconds")
    assert body["root"]["value"] == body["total"] > 0
    assert {child["name"] for child in body["root"]["children"]} >= {"runtime.main"}


@pytest.mark.parametrize(
    ("path", "detail"),
    [
        ("/api/runs/{run}/flame?scenario=fill&profile=alloc_space", "has no 'alloc_space' profile of 'fill'"),
        ("/api/runs/{run}/flame?scenario=reclaim&profile=cpu", "has no 'cpu' profile of 'reclaim'"),
        ("/api/runs/{run}/flame?scenario=fill&profile=goroutines", "has no 'goroutines' profile of 'fill'"),
        ("/runs/{run}/profiles/fill/alloc_space.pb.gz", "has no 'alloc_space' profile of 'fill'"),
        ("/runs/{run}/profiles/fill/verdicts.json", "'verdicts.json' is no profile's file (*.pb.gz)"),
        ("/runs/{run}/profiles/fill/cpu", "'cpu' is no profile's file (*.pb.gz)"),
    ],
)
def test_a_profile_the_run_does_not_have_is_a_404_naming_it(
    profiled: CountingStore, client: TestClient, path: str, detail: str
) -> None:
    answer = client.get(f"/airflow/scale-tests{path.format(run=PROFILED)}")
    assert answer.status_code == 404
    assert detail in answer.json()["detail"]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (HEAVY1.read_bytes()[:-40], "truncated gzip stream"),
        (b"<html>not a profile</html>", "not a pprof profile"),
        (b"", "empty input"),
    ],
    ids=["truncated", "not-pprof", "empty"],
)
def test_a_malformed_profile_is_a_page_that_still_renders_and_a_flame_graph_that_says_why(
    profiled: CountingStore, client: TestClient, body: bytes, why: str
) -> None:
    profiled.objects[f"Public/{PROFILED}/profiles/fill/cpu.pb.gz"] = body
    assert client.get(f"/airflow/scale-tests/runs/{PROFILED}").status_code == 200
    graph = client.get(
        f"/airflow/scale-tests/api/runs/{PROFILED}/flame", params={"scenario": "fill", "profile": "cpu"}
    )
    assert graph.status_code == 422
    assert graph.json()["detail"].startswith("the cpu profile of fill cannot be drawn: ")
    assert why in graph.json()["detail"]


def test_a_profile_entry_that_is_not_one_is_shown_as_unreadable(
    profiled: CountingStore, client: TestClient
) -> None:
    profiled.put(ENTRIES[2]["path"], _results("8m") | {"profiles": {"fill": {"status": "collected"}}})
    page = client.get(f"/airflow/scale-tests/runs/{PROFILED}").text
    assert '<span class="outcome outcome-unreadable">unreadable</span>' in page
    assert "the results&#39; profiles entry is not one: " in page
    graph = client.get(
        f"/airflow/scale-tests/api/runs/{PROFILED}/flame", params={"scenario": "fill", "profile": "cpu"}
    )
    assert graph.status_code == 404


@pytest.mark.parametrize("file", ["../metrics.json", "profiles/fill/../../verdicts.json", "cpu.pb.gz"])
def test_an_entry_naming_its_file_anywhere_else_is_not_served(
    profiled: CountingStore, client: TestClient, file: str
) -> None:
    """Only the run's own profiles, where the pipeline publishes them, are read through the view."""
    results = json.loads(profiled.objects[ENTRIES[2]["path"]])
    results["profiles"]["fill"]["profiles"]["cpu"]["file"] = file
    profiled.put(ENTRIES[2]["path"], results)
    for path in (
        f"/runs/{PROFILED}/profiles/fill/cpu.pb.gz",
        f"/api/runs/{PROFILED}/flame?scenario=fill&profile=cpu",
    ):
        answer = client.get(f"/airflow/scale-tests{path}")
        assert answer.status_code == 404
        assert answer.json()["detail"] == f"run {PROFILED} has no 'cpu' profile of 'fill'"


@pytest.mark.parametrize(
    ("results_profiles", "verdicts_profiles", "said"),
    [
        ([], None, "the results&#39; profiles are not a mapping of scenarios but list"),
        ("cpu", None, "the results&#39; profiles are not a mapping of scenarios but str"),
        (None, [], "the verdicts&#39; profiles are not a mapping of scenarios but list"),
        (None, {"fill": {"flagged": "perhaps"}}, "the verdicts&#39; profiles entry is not one: "),
    ],
)
def test_profiles_or_their_verdicts_that_are_not_what_the_pipeline_writes_are_said_on_the_page(
    profiled: CountingStore,
    client: TestClient,
    results_profiles: object,
    verdicts_profiles: object,
    said: str,
) -> None:
    if results_profiles is not None:
        profiled.put(ENTRIES[2]["path"], _results("8m") | {"profiles": results_profiles})
    if verdicts_profiles is not None:
        profiled.put(f"Public/{PROFILED}/verdicts.json", {"profiles": verdicts_profiles})
    page = client.get(f"/airflow/scale-tests/runs/{PROFILED}")
    assert page.status_code == 200
    assert said in page.text
    flame = client.get(
        f"/airflow/scale-tests/api/runs/{PROFILED}/flame", params={"scenario": "fill", "profile": "cpu"}
    )
    assert flame.status_code == (404 if results_profiles is not None else 200)


def test_a_flame_graph_is_drawn_once_per_published_profile(
    profiled: CountingStore, client: TestClient
) -> None:
    key = f"Public/{PROFILED}/profiles/fill/cpu.pb.gz"
    for _ in range(3):
        graph = client.get(
            f"/airflow/scale-tests/api/runs/{PROFILED}/flame", params={"scenario": "fill", "profile": "cpu"}
        )
        assert graph.status_code == 200
    assert profiled.reads[key] == 1, "read and decoded once; the manifest entry is unchanged"
