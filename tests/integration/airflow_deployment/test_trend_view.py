"""The trend view as a person uses it: the deployed api-server with the plugin, in headless Chromium.

A small history (passes, a failed scenario, a regression: ``trend_history``) is published to the S3
endpoint the way the pipeline publishes, under a prefix of the test's own; the package's Airflow
release (the official chart, conftest.py) is upgraded so that its api-server reads that prefix
(``KAI_SCALE_RESULTS_PREFIX``, the api-server's own setting: no other pod restarts), and a viewer is
added through FAB's API as an admin adds one. Debian's chromium, driven through its
chromedriver, signs in on Airflow's login page and goes through Runs, Trends and One run. Screenshots
go to each test's output directory (``tmp_path``).

The api-server reads the history's prefix until the release is removed: this module runs after
test_release.py, whose nights the view shows from the release's own prefix.
"""

from __future__ import annotations

import dataclasses
import secrets
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from kai_scale.hooks.results_bucket import ResultsBucketHook, Unchanged, Versioned
from localenv.airflow import AirflowDeployment
from localenv.airflow_api import AirflowApi
from localenv.demo import VIEW_RUN_PATH
from tests.trend_history import (
    FAILED_RUN,
    FAILURE_REASON,
    FILL_TEST,
    NODE_COUNT,
    PROFILED_SCENARIO,
    PROFILES,
    REGRESSION_FROM,
    RUNS,
    TRUNCATED_SCENARIO,
    PublishedHistory,
    publish_history,
)
from tests.waiting import free_ports, wait_for

pytestmark = pytest.mark.restarts_local_env

USER = "scale-reader"
# A user who may read the plugins but no DAG's runs.
OUTSIDER = "scale-outsider"
# The role that lets a user see "Scale tests" in Airflow's nav (docs/trend-view.md#who-sees-it).
PLUGINS_READER = "Plugins reader"
VIEW = "/scale-tests"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# As wide as a laptop's window beside another: the run page must still fit without scrolling sideways.
NARROW_WINDOW = 900


@pytest.fixture(scope="module")
def store(s3_from_this_machine: dict[str, str]) -> ResultsBucketHook:
    """The results bucket through the Airflow connection, as the pipeline and the view reach it."""
    return ResultsBucketHook(
        aws_conn_id="aws_default", bucket=s3_from_this_machine["KAI_SCALE_RESULTS_BUCKET"]
    )


@pytest.fixture(scope="module")
def history(store: ResultsBucketHook) -> Iterator[PublishedHistory]:
    """The history, published under a prefix of its own; its objects are removed afterwards."""
    tag = uuid.uuid4().hex[:8]
    published = publish_history(store, prefix=f"test-view-{tag}/Public/", now=datetime.now(UTC), tag=tag)
    yield published
    for key in published.keys:
        store.delete(key)


@dataclass(frozen=True, kw_only=True)
class AirflowUI:
    """The deployed api-server on loopback and the user who may read the DAG's runs."""

    url: str
    """Its address, ``http://localhost:<port>``."""
    password: str
    """``USER``'s password (FAB's roles Viewer and PLUGINS_READER)."""


@pytest.fixture(scope="module")
def airflow_ui(airflow_deployment: AirflowDeployment, history: PublishedHistory) -> Iterator[AirflowUI]:
    """The release's api-server reading the history's prefix, served on a free port, and a viewer."""
    airflow_deployment.deploy(
        dataclasses.replace(
            airflow_deployment.overrides,
            component_env={"apiServer": {"KAI_SCALE_RESULTS_PREFIX": history.prefix}},
        )
    )
    (port,) = free_ports(1)
    url = airflow_deployment.serve_ui(port)
    password = secrets.token_urlsafe(12)
    admin = AirflowApi(url)
    try:
        _add_users(admin, password)
    finally:
        admin.close()
    yield AirflowUI(url=url, password=password)
    airflow_deployment.stop_ui(port)


def _add_users(admin: AirflowApi, password: str) -> None:
    """USER (FAB's role Viewer and PLUGINS_READER) and OUTSIDER (PLUGINS_READER alone), as an admin adds them.

    Viewer reads the DAGs and their runs, which the view asks for; Airflow's UI lists a plugin's
    pages in its nav only for who may read the plugins, which Viewer may not.
    """
    admin.login()
    fab = f"{admin.base_url}/auth/fab/v1"
    headers = {"Authorization": f"Bearer {admin.token}"}
    reads_plugins = {"action": {"name": "can_read"}, "resource": {"name": "Plugins"}}
    role = httpx.post(
        f"{fab}/roles", headers=headers, json={"name": PLUGINS_READER, "actions": [reads_plugins]}, timeout=60
    )
    assert role.status_code in (200, 201, 409), role.text  # 409: an earlier run added it
    for name, roles in ((USER, ["Viewer", PLUGINS_READER]), (OUTSIDER, [PLUGINS_READER])):
        httpx.delete(f"{fab}/users/{name}", headers=headers, timeout=60)  # 404 unless an earlier run added it
        added = httpx.post(
            f"{fab}/users",
            headers=headers,
            json={
                "username": name,
                "password": password,
                "email": f"{name}@example.com",
                "first_name": "Scale",
                "last_name": "Reader",
                "roles": [{"name": role} for role in roles],
            },
            timeout=60,
        )
        assert added.status_code in (200, 201), added.text


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    """Headless Chromium (Debian's, through its chromedriver: ``make browser`` installs them)."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not Path(path).exists()]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} not installed: `make browser` installs Debian's chromium and its driver"
        )
    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def signed_in(browser: webdriver.Chrome, airflow_ui: AirflowUI) -> webdriver.Chrome:
    """The browser, signed in on Airflow's own login page."""
    browser.get(f"{airflow_ui.url}/")
    wait_for(
        lambda: browser.find_elements(By.CSS_SELECTOR, "input[name=username]"),
        timeout=60,
        what="Airflow's login page",
    )
    browser.find_element(By.CSS_SELECTOR, "input[name=username]").send_keys(USER)
    browser.find_element(By.CSS_SELECTOR, "input[name=password]").send_keys(airflow_ui.password)
    browser.find_element(By.CSS_SELECTOR, "[type=submit]").click()
    wait_for(lambda: browser.get_cookie("_token"), timeout=30, what="Airflow's session cookie")
    return browser


def _element(browser: webdriver.Chrome, css: str, *, timeout: float = 30) -> WebElement:
    found: list[WebElement] = wait_for(
        lambda: browser.find_elements(By.CSS_SELECTOR, css), timeout=timeout, what=f"an element {css!r}"
    )
    return found[0]


def _reload_by(browser: webdriver.Chrome, control: WebElement) -> None:
    """Click ``control`` and wait for the page it loads.

    A mark set on the old page's window is not on the new one's. (Asking an element of the old page
    whether it went stale fails three different ways in Chromium, one of them an "unknown error".)
    """
    browser.execute_script("window.kaiOldPage = true")
    control.click()
    refusals: list[WebDriverException] = []

    def replaced() -> bool:
        try:
            return browser.execute_script("return window.kaiOldPage === undefined") is True
        # Between the two documents there is no window to ask; the next probe asks the new one.
        except WebDriverException as refused:
            refusals[:] = [refused]
            return False

    try:
        wait_for(replaced, timeout=30, what="the next page to load")
    except AssertionError as timed_out:
        if not refusals:
            raise
        raise AssertionError(f"{timed_out}; the browser's last refusal: {refusals[0].msg}") from timed_out
    _element(browser, "main")


def _drawn(browser: webdriver.Chrome, chart: WebElement) -> WebElement:
    """The chart, once scrolled into view and drawn."""
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", chart)
    wait_for(
        lambda: chart.get_attribute("data-rendered"),
        timeout=30,
        what=f"chart {chart.get_attribute('data-title')!r} to draw",
    )
    assert chart.get_attribute("data-rendered") == "true", chart.text
    return chart


def _option(browser: webdriver.Chrome, chart: WebElement) -> dict[str, Any]:
    """What the chart draws, as ECharts holds it."""
    option: dict[str, Any] = browser.execute_script(
        "const option = echarts.getInstanceByDom(arguments[0]).getOption();"
        # Without the axis' callbacks, which JSON cannot carry.
        "const plain = (key, value) => (typeof value === 'function' ? null : value);"
        "return JSON.parse(JSON.stringify(option, plain));",
        chart,
    )
    return option


def test_an_object_is_sent_again_only_when_it_changed(
    store: ResultsBucketHook, history: PublishedHistory
) -> None:
    """What keeps a 10,000-run manifest from being downloaded and parsed on every page."""
    key = f"{history.prefix}probe.json"
    store.write_text(key=key, text='{"runs": []}')
    try:
        read = store.read_if_changed(key, etag=None)
        assert isinstance(read, Versioned)
        assert store.read_if_changed(key, etag=read.etag) is Unchanged.UNCHANGED
        store.write_text(key=key, text='{"runs": [{}]}')
        changed = store.read_if_changed(key, etag=read.etag)
        assert isinstance(changed, Versioned)
        assert changed.body == b'{"runs": [{}]}'
    finally:
        store.delete(key)
    assert store.read_if_changed(key, etag=read.etag) is None


def test_the_view_answers_only_who_may_read_the_dags_runs(
    airflow_ui: AirflowUI, history: PublishedHistory
) -> None:
    page = f"{airflow_ui.url}{VIEW}/runs"
    assert httpx.get(page, timeout=30).status_code == 401

    def as_user(name: str) -> httpx.Response:
        login = {"username": name, "password": airflow_ui.password}
        token = httpx.post(f"{airflow_ui.url}/auth/token", json=login, timeout=30).json()["access_token"]
        return httpx.get(page, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    refused = as_user(OUTSIDER)
    assert refused.status_code == 403, refused.text
    assert history.run_ids[-1] not in refused.text
    answer = as_user(USER)
    assert answer.status_code == 200
    assert history.run_ids[-1] in answer.text
    # Like Airflow's own assets, the chart library is served to anyone.
    assert httpx.get(f"{airflow_ui.url}{VIEW}/static/vendor/echarts.min.js", timeout=30).status_code == 200


def test_scale_tests_in_airflows_nav_opens_the_runs_newest_first(
    signed_in: webdriver.Chrome, airflow_ui: AirflowUI, history: PublishedHistory, tmp_path: Path
) -> None:
    browser = signed_in
    browser.get(f"{airflow_ui.url}/")
    nav = wait_for(
        lambda: [
            link for link in browser.find_elements(By.TAG_NAME, "a") if link.text.strip() == "Scale tests"
        ],
        timeout=60,
        what="'Scale tests' in Airflow's nav",
    )
    nav[0].click()
    browser.switch_to.frame(_element(browser, "iframe[title='Scale tests']"))
    _element(browser, "tr[data-run-id]")
    rows = browser.find_elements(By.CSS_SELECTOR, "tr[data-run-id]")
    assert [row.get_attribute("data-run-id") for row in rows] == history.run_ids[::-1]
    newest, failed = rows[0], rows[RUNS - 1 - FAILED_RUN]
    assert newest.find_element(By.CSS_SELECTOR, ".outcome").text == "regression"
    assert history.kai_refs[-1] in newest.text
    assert failed.find_element(By.CSS_SELECTOR, ".outcome").text == "failure"
    assert failed.find_element(By.CSS_SELECTOR, ".failed").text == "reclaim"
    browser.switch_to.default_content()
    browser.save_screenshot(str(tmp_path / "airflow-nav-runs.png"))

    # The link to the Airflow run opens it in Airflow's page, not inside the view's frame.
    browser.switch_to.frame(browser.find_element(By.CSS_SELECTOR, "iframe[title='Scale tests']"))
    browser.find_element(By.CSS_SELECTOR, "tr[data-run-id] a.airflow-link").click()
    browser.switch_to.default_content()
    wait_for(
        lambda: not browser.find_elements(By.CSS_SELECTOR, "iframe[title='Scale tests']"),
        timeout=30,
        what="Airflow's page to replace the view",
    )
    assert browser.current_url == f"{airflow_ui.url}/dags/kai_scale_nightly/runs/" + quote(
        history.airflow_run_ids[-1], safe=""
    )


def test_the_runs_filters(
    signed_in: webdriver.Chrome, airflow_ui: AirflowUI, history: PublishedHistory, tmp_path: Path
) -> None:
    browser = signed_in
    browser.get(f"{airflow_ui.url}{VIEW}/runs")

    def filter_by(*, outcome: str = "", nodes: str = "", text: str = "") -> list[str]:
        _element(browser, "select[name=outcome]").find_element(
            By.CSS_SELECTOR, f"option[value='{outcome}']"
        ).click()
        browser.find_element(By.CSS_SELECTOR, f"select[name=node_count] option[value='{nodes}']").click()
        search = browser.find_element(By.CSS_SELECTOR, "input[name=q]")
        search.clear()
        search.send_keys(text)
        _reload_by(browser, browser.find_element(By.CSS_SELECTOR, "form.filters button"))
        return [
            row.get_attribute("data-run-id") or ""
            for row in browser.find_elements(By.CSS_SELECTOR, "tr[data-run-id]")
        ]

    assert filter_by(outcome="failure") == [history.run_ids[FAILED_RUN]]
    assert filter_by(outcome="regression") == history.regressed[::-1]
    assert filter_by(text="reclaim") == [history.run_ids[FAILED_RUN]], "a failed scenario is found by name"
    assert filter_by(text=history.commits[-1]) == [history.run_ids[-1]]
    assert filter_by(nodes=str(NODE_COUNT)) == history.run_ids[::-1]
    assert browser.find_element(By.ID, "run-count").text == f"{RUNS} of {RUNS} runs"
    filter_by(outcome="failure")
    browser.save_screenshot(str(tmp_path / "runs-failed.png"))


def test_the_trends_draw_each_detail_with_failures_bounds_and_regressions(
    signed_in: webdriver.Chrome, airflow_ui: AirflowUI, history: PublishedHistory, tmp_path: Path
) -> None:
    browser = signed_in
    browser.get(f"{airflow_ui.url}{VIEW}/trends")
    assert _element(browser, "#window").text.startswith(f"{RUNS} runs at {NODE_COUNT} nodes")
    assert f"{FILL_TEST} · nodes = {NODE_COUNT}" in browser.find_element(By.ID, "unchanged").text
    charts = {
        chart.get_attribute("data-title"): chart for chart in browser.find_elements(By.CSS_SELECTOR, ".chart")
    }
    first, *_, last = charts.values()
    # Charts below the fold are not loaded until they are scrolled to.
    wait_for(lambda: first.get_attribute("data-rendered"), timeout=30, what="the first chart to draw")
    assert last.get_attribute("data-rendered") is None

    fill = _drawn(browser, charts[f"{FILL_TEST} · time"])
    option = _option(browser, fill)
    values, failed = option["series"]
    assert len(values["data"]) == RUNS
    assert [point["point"]["run_id"] for point in values["data"]] == history.run_ids
    assert [point["failure"]["run_id"] for point in failed["data"]] == [history.run_ids[FAILED_RUN]]
    assert [mark["name"] for mark in values["markLine"]["data"]] == ["threshold max"]
    assert values["markLine"]["data"][0]["yAxis"] == 540
    regressions = [mark for mark in values["markPoint"]["data"] if mark["name"] == "regression"]
    assert len(regressions) == len(history.regressed) == RUNS - REGRESSION_FROM
    assert option["yAxis"][0]["name"] == "time (s)"
    drawn = fill.find_element(By.TAG_NAME, "svg").get_attribute("textContent") or ""
    assert "max 540 s" in drawn
    assert drawn.count("regression") == len(history.regressed)

    # A point's tooltip names its run, date, KAI ref and commit, and links to the run.
    x, y = browser.execute_script(
        "const chart = echarts.getInstanceByDom(arguments[0]);"
        "const data = chart.getOption().series[0].data;"
        "return chart.convertToPixel({seriesIndex: 0}, data[data.length - 1].value);",
        fill,
    )
    ActionChains(browser).move_to_element_with_offset(
        fill, int(x - fill.size["width"] / 2), int(y - fill.size["height"] / 2)
    ).perform()
    tooltip = wait_for(
        lambda: [text for text in [fill.get_attribute("innerText") or ""] if history.run_ids[-1] in text],
        timeout=10,
        what="the newest point's tooltip",
    )[0]
    assert history.kai_refs[-1] in tooltip
    assert history.commits[-1] in tooltip
    assert history.timestamps[-1].replace("T", " ").replace("Z", " UTC") in tooltip
    link = fill.find_element(By.CSS_SELECTOR, f"a[href$='/runs/{history.run_ids[-1]}']")
    browser.save_screenshot(str(tmp_path / "trends.png"))
    link.click()
    assert _element(browser, "h1").text.startswith(f"Run {history.run_ids[-1]}")

    browser.back()
    _element(browser, "#window")
    # The last chart, reclaim's time: the run in which reclaim failed has no value, so a line marks it.
    reclaim = _drawn(browser, browser.find_elements(By.CSS_SELECTOR, ".chart")[-1])
    assert reclaim.get_attribute("data-title") == "Reclaim GPU Jobs · time"
    assert reclaim.get_attribute("data-points") == str(RUNS - 1)
    failure_lines = [
        mark
        for mark in _option(browser, reclaim)["series"][0]["markLine"]["data"]
        if mark["name"] == "failed"
    ]
    assert [line["xAxis"] for line in failure_lines] == [
        int(datetime.fromisoformat(history.timestamps[FAILED_RUN].replace("Z", "+00:00")).timestamp() * 1000)
    ]
    assert "failed" in (reclaim.find_element(By.TAG_NAME, "svg").get_attribute("textContent") or "")


def test_one_run_shows_its_scenarios_each_ones_previous_run_and_its_metrics(
    signed_in: webdriver.Chrome, airflow_ui: AirflowUI, history: PublishedHistory, tmp_path: Path
) -> None:
    browser = signed_in
    # A run's address in Airflow's UI (what `make demo` prints) opens the view's page in Airflow's frame.
    browser.get(f"{airflow_ui.url}{VIEW_RUN_PATH}{history.run_ids[FAILED_RUN]}")
    browser.switch_to.frame(_element(browser, "iframe[title='Scale tests']"))
    reclaim = _element(browser, "tr[data-scenario=reclaim]")
    assert "failure" in reclaim.text
    assert FAILURE_REASON in reclaim.text
    browser.switch_to.default_content()

    newest = history.run_ids[-1]
    browser.get(f"{airflow_ui.url}{VIEW}/runs")
    _element(browser, f"tr[data-run-id='{newest}'] td a").click()
    assert _element(browser, "h1").text == f"Run {newest} regression"
    scenarios = browser.find_elements(By.CSS_SELECTOR, "tr[data-scenario]")
    assert [row.get_attribute("data-scenario") for row in scenarios] == [
        "sanity-fill-cluster",
        "gpu-pod-throughput",
        "reclaim",
    ]
    flagged = [row.text for row in browser.find_elements(By.CSS_SELECTOR, "table.details tr.flagged")]
    assert len(flagged) == 1
    assert f"regressed since run {history.run_ids[REGRESSION_FROM]}" in flagged[0]
    # Each scenario beside its own previous run: here the night before for all three.
    assert [row.find_element(By.CSS_SELECTOR, "td.previous-run").text for row in scenarios] == [
        history.run_ids[-2]
    ] * 3

    charts = browser.find_elements(By.CSS_SELECTOR, ".chart[data-kind=metric]")
    assert len(charts) == 3 * 2  # two named queries for each of the three scenarios
    latency = _drawn(browser, charts[-2])
    assert latency.get_attribute("data-series") == "2"
    assert [series["name"] for series in _option(browser, latency)["series"]] == [
        "action=allocate",
        "action=reclaim",
    ]
    browser.save_screenshot(str(tmp_path / "one-run-metrics.png"))
    browser.execute_script("window.scrollTo(0, 0)")
    browser.save_screenshot(str(tmp_path / "one-run.png"))

    # The night after reclaim failed, reclaim is compared with the night before that; its link opens it.
    browser.get(f"{airflow_ui.url}{VIEW}/runs/{history.run_ids[FAILED_RUN + 1]}")
    previous = {
        row.get_attribute("data-scenario"): row.find_element(By.CSS_SELECTOR, "td.previous-run")
        for row in browser.find_elements(By.CSS_SELECTOR, "tr[data-scenario]")
    }
    assert {scenario: cell.text for scenario, cell in previous.items()} == {
        "sanity-fill-cluster": history.run_ids[FAILED_RUN],
        "gpu-pod-throughput": history.run_ids[FAILED_RUN],
        "reclaim": history.run_ids[FAILED_RUN - 1],
    }
    reclaim_time = browser.find_element(
        By.CSS_SELECTOR, "tr[data-test='Reclaim GPU Jobs'][data-detail=time] td.previous-run"
    )
    assert reclaim_time.text == history.run_ids[FAILED_RUN - 1]
    browser.save_screenshot(str(tmp_path / "one-run-previous-runs.png"))
    _reload_by(browser, previous["reclaim"].find_element(By.TAG_NAME, "a"))
    assert _element(browser, "h1").text == f"Run {history.run_ids[FAILED_RUN - 1]} pass"


def test_a_runs_profiles_show_what_grew_draw_as_flame_graphs_and_download(
    signed_in: webdriver.Chrome, airflow_ui: AirflowUI, history: PublishedHistory, tmp_path: Path
) -> None:
    browser = signed_in
    newest = history.run_ids[-1]
    browser.get(f"{airflow_ui.url}{VIEW}/runs/{newest}")
    profiles = _element(browser, f"section.profiles[data-scenario='{PROFILED_SCENARIO}']")
    grew = profiles.find_elements(By.CSS_SELECTOR, "table.share-changes tr.grew td:first-child")
    assert grew[0].text == "main.light", "what the verdicts found grew most, against the night before"
    assert history.run_ids[-2] in profiles.find_element(By.CSS_SELECTOR, ".profile-comparison").text

    flame = _drawn(
        browser, profiles.find_element(By.CSS_SELECTOR, ".chart[data-kind=flame][data-profile=cpu]")
    )
    assert int(flame.get_attribute("data-frames") or 0) > 3
    frames = flame.find_elements(By.CSS_SELECTOR, "svg g")
    assert len(frames) > 3
    assert {"main.heavy", "main.light"} <= {frame.text for frame in frames}, (
        "d3-flame-graph labels the frames"
    )
    browser.save_screenshot(str(tmp_path / "one-run-profiles.png"))

    # d3-flame-graph draws at a fixed width: a narrower window redraws it at its box's new width.
    drawn_at = int(flame.get_attribute("data-width") or 0)
    size = browser.get_window_size()
    browser.set_window_size(NARROW_WINDOW, size["height"])
    try:
        wait_for(
            lambda: 0 < int(flame.get_attribute("data-width") or 0) < drawn_at,
            timeout=30,
            what=f"the flame graph drawn at {drawn_at} px redrawn narrower",
        )
        # Read together: a later redraw cannot come between the two.
        drawn = browser.execute_script(
            "const box = arguments[0];"
            "return [box.querySelector('svg').getAttribute('width'), box.dataset.width]",
            flame,
        )
        assert drawn[0] == drawn[1], drawn
        # Nor does the page scroll sideways: a table too wide scrolls in its own box.
        page, wider = browser.execute_script(
            "const page = document.documentElement;"
            "const wider = [...document.querySelectorAll('body *')]"
            ".filter((e) => e.getBoundingClientRect().right > page.clientWidth + 1)"
            ".filter((e) => !(e.parentElement && e.parentElement.closest('.table-scroll')))"
            ".map((e) => e.tagName + '.' + (e.getAttribute('class') || ''));"
            "return [[page.scrollWidth, page.clientWidth], wider.slice(0, 5)]"
        )
        assert page[0] <= page[1], f"the page scrolls sideways in a {NARROW_WINDOW} px window: {wider}"
    finally:
        browser.set_window_size(size["width"], size["height"])

    link = profiles.find_element(By.CSS_SELECTOR, "a.profile-download")
    downloaded = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {credentials: 'same-origin'})"
        ".then((r) => r.arrayBuffer()).then((b) => done(Array.from(new Uint8Array(b))));",
        link.get_attribute("href"),
    )
    assert bytes(downloaded) == PROFILES[RUNS - 1].read_bytes(), "the pprof file as published"

    # A profile file that lost its end: its box says why; the rest of the page is drawn.
    truncated = browser.find_element(
        By.CSS_SELECTOR, f"section.profiles[data-scenario='{TRUNCATED_SCENARIO}'] .chart[data-kind=flame]"
    )
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", truncated)
    wait_for(lambda: truncated.get_attribute("data-rendered"), timeout=30, what="the truncated profile's box")
    assert truncated.get_attribute("data-rendered") == "error"
    assert "the cpu profile of gpu-pod-throughput cannot be drawn: truncated gzip stream" in truncated.text
