"""The view on what the pipeline publishes, read from a bucket of the moto server (see conftest.py).

``tests.trend_history``'s runs are written by the pipeline's own functions (results document, run
summary, ``judge_run``, ``publish_run``): a change to those documents that the view does not follow
fails here, not in a browser.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.views.app import create_app
from kai_scale.views.reader import ResultsReader
from tests.trend_history import (
    FAILED_RUN,
    FILL_TEST,
    PROFILED_SCENARIO,
    PROFILES,
    REGRESSION_FROM,
    RUNS,
    TRUNCATED_SCENARIO,
    PublishedHistory,
    publish_history,
)
from tests.unit.provider.conftest import S3_CONN_ID, s3_connection_variable

PREFIX = "Public/"


@pytest.fixture(scope="module")
def history(s3_endpoint: str) -> Iterator[tuple[ResultsBucketHook, PublishedHistory]]:
    """The history, published once for the module into a bucket of its own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(*s3_connection_variable(s3_endpoint))
        bucket = ResultsBucketHook(aws_conn_id=S3_CONN_ID, bucket=f"unit-view-{uuid.uuid4().hex[:12]}")
        bucket.client.create_bucket(Bucket=bucket.bucket)
        yield bucket, publish_history(bucket, prefix=PREFIX, now=datetime.now(UTC), tag="unit")


@pytest.fixture(scope="module")
def client(history: tuple[ResultsBucketHook, PublishedHistory]) -> Iterator[TestClient]:
    bucket, _ = history
    app = create_app(
        reader=ResultsReader(store=bucket, prefix=PREFIX),
        dag_id="kai_scale_nightly",
        authorization=lambda: None,
    )
    with TestClient(app) as client:
        yield client


def _row(page: str, attributes: str) -> str:
    """The table row of the page whose opening tag carries ``attributes``."""
    found = re.search(rf"<tr {re.escape(attributes)}[^>]*>(.*?)</tr>", page, flags=re.DOTALL)
    assert found, f"no <tr {attributes}> in the page"
    return found.group(1)


def _previous_run(row: str) -> str:
    """What a row's previous-run cell holds: the linked run id, or its text."""
    cell = re.search(r'<td class="previous-run">(.*?)</td>', row, flags=re.DOTALL)
    assert cell, row
    link = re.search(r'<a class="run-link" href="/runs/([^"]+)">\1</a>', cell.group(1))
    return link.group(1) if link else cell.group(1).strip()


def test_each_scenario_links_its_own_previous_run(
    history: tuple[ResultsBucketHook, PublishedHistory], client: TestClient
) -> None:
    _, published = history
    runs = published.run_ids
    # The night after the failed one: reclaim has no results of that night to compare with.
    page = client.get(f"/runs/{runs[FAILED_RUN + 1]}").text
    assert [
        _previous_run(_row(page, f'data-scenario="{name}"'))
        for name in ("sanity-fill-cluster", "gpu-pod-throughput", "reclaim")
    ] == [runs[FAILED_RUN], runs[FAILED_RUN], runs[FAILED_RUN - 1]]
    fill_time = _row(page, f'data-test="{FILL_TEST}" data-detail="time"')
    assert _previous_run(fill_time) == runs[FAILED_RUN]
    assert re.search(r'<td class="number">[+-]\d+\.\d %</td>', fill_time), "the change in percent"
    assert (
        _previous_run(_row(page, 'data-test="Reclaim GPU Jobs" data-detail="time"')) == runs[FAILED_RUN - 1]
    )


def test_the_first_run_had_none_to_compare_with_and_a_failed_scenario_is_not_compared(
    history: tuple[ResultsBucketHook, PublishedHistory], client: TestClient
) -> None:
    _, published = history
    first = client.get(f"/runs/{published.run_ids[0]}").text
    assert _previous_run(_row(first, 'data-scenario="reclaim"')) == "no earlier run"
    failed = client.get(f"/runs/{published.run_ids[FAILED_RUN]}").text
    assert _previous_run(_row(failed, 'data-scenario="reclaim"')) == ""
    assert _previous_run(_row(failed, 'data-test="reclaim" data-detail="message"')) == ""
    assert (
        _previous_run(_row(failed, 'data-scenario="sanity-fill-cluster"'))
        == published.run_ids[FAILED_RUN - 1]
    )


def test_the_newest_run_shows_its_regression_and_verdict(
    history: tuple[ResultsBucketHook, PublishedHistory], client: TestClient
) -> None:
    _, published = history
    page = client.get(f"/runs/{published.run_ids[-1]}").text
    assert "<h2>Verdict: regression</h2>" in page
    fill_time = _row(page, f'data-test="{FILL_TEST}" data-detail="time"')
    assert f"regressed since run {published.run_ids[REGRESSION_FROM]}" in fill_time


def test_a_trend_has_the_failures_bounds_and_regressions_the_pipeline_published(
    history: tuple[ResultsBucketHook, PublishedHistory], client: TestClient
) -> None:
    _, published = history
    data = client.get(
        "/api/trend", params={"node_count": 500, "test": FILL_TEST, "detail": "time", "days": 3650}
    ).json()
    assert [point["run_id"] for point in data["points"]] == published.run_ids
    assert [failure["run_id"] for failure in data["failures"]] == [published.run_ids[FAILED_RUN]]
    assert [mark["run_id"] for mark in data["regressions"]] == published.regressed
    assert len(published.regressed) == RUNS - REGRESSION_FROM
    assert (data["unit"], data["bound_min"], data["bound_max"]) == ("s", None, 540.0)


def test_a_failed_scenario_is_found_by_the_name_its_manifest_entry_gives(
    history: tuple[ResultsBucketHook, PublishedHistory], client: TestClient
) -> None:
    _, published = history
    page = client.get("/runs", params={"q": "reclaim"}).text
    assert re.findall(r'<tr data-run-id="([^"]+)">', page) == [published.run_ids[FAILED_RUN]]
    assert '<td class="failed">reclaim</td>' in page


def test_the_newest_runs_profile_is_compared_with_the_night_befores_and_served_as_published(
    history: tuple[ResultsBucketHook, PublishedHistory], client: TestClient
) -> None:
    """The published profile's verdict names what grew (main.light); its file and flame graph are served."""
    bucket, published = history
    newest, before = published.run_ids[-1], published.run_ids[-2]
    page = client.get(f"/runs/{newest}").text
    profiles = page[page.index("Profiles of KAI's scheduler") : page.index("Prometheus metrics")]
    assert f'<section class="profiles" data-scenario="{PROFILED_SCENARIO}">' in profiles
    assert f'CPU against <a class="run-link" href="/runs/{before}">{before}</a>' in profiles
    assert '<tr class="grew"><td><code>main.light</code></td>' in profiles
    download = client.get(f"/runs/{newest}/profiles/{PROFILED_SCENARIO}/cpu.pb.gz")
    assert download.content == PROFILES[RUNS - 1].read_bytes()
    assert f"{PREFIX}{newest}/profiles/{PROFILED_SCENARIO}/cpu.pb.gz" in published.keys
    flame = client.get(f"/api/runs/{newest}/flame", params={"scenario": PROFILED_SCENARIO, "profile": "cpu"})
    assert flame.json()["root"]["value"] == flame.json()["total"] > 0
    assert "This run has no profiles" in client.get(f"/runs/{published.run_ids[0]}").text
    assert bucket.read_bytes(f"{PREFIX}{newest}/profiles/{PROFILED_SCENARIO}/cpu.pb.gz") == download.content


def test_the_newest_runs_truncated_profile_is_a_flame_graph_that_says_why(
    history: tuple[ResultsBucketHook, PublishedHistory], client: TestClient
) -> None:
    _, published = history
    newest = published.run_ids[-1]
    assert (
        f'<section class="profiles" data-scenario="{TRUNCATED_SCENARIO}">'
        in client.get(f"/runs/{newest}").text
    )
    flame = client.get(f"/api/runs/{newest}/flame", params={"scenario": TRUNCATED_SCENARIO, "profile": "cpu"})
    assert flame.status_code == 422
    assert "truncated gzip stream" in flame.json()["detail"]
