"""Publishing against the local S3 endpoint (moto server over HTTP): objects, manifest, conditional writes."""

from __future__ import annotations

import http.client
import http.server
import json
import random
import threading
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.exceptions import ClientError

from kai_scale.hooks.results_bucket import BucketError, ObjectChanged, ResultsBucketHook
from kai_scale.object_keys import manifest_key, published_keys, run_file_key
from kai_scale.profiles.collection import (
    CPU_PROFILE,
    CollectedProfile,
    RunProfiles,
    ScenarioProfiles,
    profile_file,
    profile_files,
    without_gone_files,
)
from kai_scale.profiles.summary import summarize
from kai_scale.publishing.manifest import ManifestError
from kai_scale.publishing.publisher import PublishedRun, PublishError, copy_run_files, publish_run
from kai_scale.publishing.verdicts_step import judge_run
from kai_scale_model.scenario import Scenario
from localenv import settings as localenv_settings
from tests.unit.provider.profiles.builder import HEAVY3, LIGHT3, fixture
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("airflow_on_local_env")

S3_DOWN_SECONDS = 60


def _store() -> ResultsBucketHook:
    return ResultsBucketHook(aws_conn_id="aws_default", bucket=localenv_settings.DEFAULT_BUCKET)


@pytest.fixture
def prefix() -> str:
    """A prefix of its own per test, so tests never share a manifest."""
    return f"test-{uuid.uuid4().hex[:8]}/Public/"


def _results(run_id: str, status: str = "success") -> dict[str, Any]:
    return {"metadata": {"run": run_id}, "results": {"status": status, "tests": []}}


def _entry(run_id: str, prefix: str, status: str = "success") -> dict[str, Any]:
    return {
        "timestamp": "2026-11-22T02:00:00Z",
        "path": f"{prefix}{run_id}/results.json",
        "commit": "abc",
        "run_id": run_id,
        "status": status,
    }


def _publish(store: ResultsBucketHook, prefix: str, run_id: str, **overrides: Any) -> PublishedRun:
    arguments: dict[str, Any] = {
        "prefix": prefix,
        "run_id": run_id,
        "results": _results(run_id),
        "metrics_text": json.dumps({"run_id": run_id, "scenarios": {}}),
        "ginkgo_report_keys": {},
        "verdicts": {"run_id": run_id, "verdict": "pass", "reasons": [], "tests": {}},
        "entry": _entry(run_id, prefix),
    }
    return publish_run(store, **{**arguments, **overrides})


def _manifest(store: ResultsBucketHook, prefix: str) -> dict[str, Any]:
    text = store.read_text(manifest_key(prefix))
    assert text is not None
    return dict(json.loads(text))


def test_a_run_is_published_with_its_objects_and_entry(prefix: str) -> None:
    store = _store()
    report = [{"SuitePath": "/suite", "SpecReports": [{"State": "passed"}]}]
    store.write_text(key=f"{prefix}in/report-a.json", text=json.dumps(report))
    published = _publish(
        store, prefix, "r1", ginkgo_report_keys={"a": f"{prefix}in/report-a.json", "b": None}
    )
    assert published.problems == []
    assert published.manifest_attempts == 1
    assert json.loads(store.read_text(published.keys.results) or "") == _results("r1")
    assert json.loads(store.read_text(published.keys.ginkgo_report) or "") == report
    assert json.loads(store.read_text(published.keys.metrics) or "")["run_id"] == "r1"
    head = store.client.head_object(Bucket=store.bucket, Key=published.keys.results)
    assert head["ContentType"] == "application/json"
    assert _manifest(store, prefix) == {"runs": [_entry("r1", prefix)]}


def test_a_runs_files_are_copied_beside_its_results_as_they_are(prefix: str) -> None:
    """Such as its profiles: binary, copied byte for byte from its folder under runs/; one gone is named."""
    store = _store()
    run_id = f"20260099-scheduled-{uuid.uuid4().hex[:8]}"
    profile = bytes(range(256)) * 64
    key = run_file_key(run_id, "profiles/a/cpu.pb.gz")
    store.write_bytes(key=key, data=profile, content_type="application/gzip")

    gone = copy_run_files(
        store, prefix=prefix, run_id=run_id, files=["profiles/a/cpu.pb.gz", "profiles/a/gone.pb.gz"]
    )

    keys = published_keys(prefix=prefix, run_id=run_id)
    assert keys.beside("profiles/a/cpu.pb.gz") == f"{prefix}{run_id}/profiles/a/cpu.pb.gz"
    assert store.read_bytes(keys.beside("profiles/a/cpu.pb.gz")) == profile
    head = store.client.head_object(Bucket=store.bucket, Key=keys.beside("profiles/a/cpu.pb.gz"))
    assert head["ContentType"] == "application/octet-stream", "published as the bucket's other profiles"
    assert gone == ["profiles/a/gone.pb.gz"]
    assert not store.exists(keys.beside("profiles/a/gone.pb.gz"))


def test_a_profile_whose_file_is_gone_from_the_run_is_published_as_missing(prefix: str) -> None:
    store = _store()
    run_id = f"20260099-scheduled-{uuid.uuid4().hex[:8]}"
    kept, gone = profile_file("fill", CPU_PROFILE), profile_file("fill", "inuse_space")
    summary = summarize(fixture(HEAVY3), "cpu")
    store.write_bytes(
        key=run_file_key(run_id, kept), data=HEAVY3.read_bytes(), content_type="application/gzip"
    )
    fill = ScenarioProfiles(
        status="collected",
        reason=None,
        service="kai-scheduler",
        window=None,
        profiles={
            CPU_PROFILE: CollectedProfile(status="collected", file=kept, summary=summary),
            "inuse_space": CollectedProfile(status="collected", file=gone, summary=summary),
        },
    )

    collected = RunProfiles(run_id=run_id, scenarios={"fill": fill})

    named = copy_run_files(store, prefix=prefix, run_id=run_id, files=profile_files(collected))
    profiles = without_gone_files(collected, named)

    assert named == [gone]
    assert store.exists(published_keys(prefix=prefix, run_id=run_id).beside(kept))
    assert profile_files(profiles) == [kept]
    assert (profiles.scenarios["fill"].status, profiles.scenarios["fill"].reason) == (
        "partial",
        "not collected: inuse_space",
    )


def test_publishing_a_run_again_updates_it_in_place(prefix: str) -> None:
    store = _store()
    _publish(store, prefix, "r1", results=_results("r1", "failure"), entry=_entry("r1", prefix, "failure"))
    _publish(store, prefix, "r2")
    published = _publish(store, prefix, "r1")
    runs = _manifest(store, prefix)["runs"]
    assert [(r["run_id"], r["status"]) for r in runs] == [("r1", "success"), ("r2", "success")]
    assert json.loads(store.read_text(published.keys.results) or "")["results"]["status"] == "success"


def test_twenty_concurrent_publishers_lose_no_entry(prefix: str) -> None:
    start = threading.Barrier(20)

    def publish(index: int) -> int:
        store = _store()  # a client per publisher, as separate Airflow workers would have
        assert store.client is not None  # built before the start: building one takes longer than publishing
        start.wait()
        return _publish(store, prefix, f"run-{index:02d}").manifest_attempts

    with ThreadPoolExecutor(max_workers=20) as pool:
        attempts = list(pool.map(publish, range(20)))
    runs = _manifest(_store(), prefix)["runs"]
    assert sorted(r["run_id"] for r in runs) == [f"run-{i:02d}" for i in range(20)]
    assert max(attempts) > 1, "the publishers really raced (some conditional writes lost and retried)"


@pytest.mark.parametrize(
    ("corrupt", "problem"),
    [
        (b'{"runs": [{"timestamp": "2026-11-01T02:00:00Z", "path": "Public/old/res', "is not valid JSON"),
        (b'{"runs": [{"path": "Public/\xff\xfe/results.json"}]}', "is not UTF-8 text"),
    ],
)
def test_a_corrupt_manifest_is_refused_and_left_intact(prefix: str, corrupt: bytes, problem: str) -> None:
    store = _store()
    store.client.put_object(Bucket=store.bucket, Key=manifest_key(prefix), Body=corrupt)
    with pytest.raises(ManifestError, match=f"{manifest_key(prefix)} {problem}.*refusing to overwrite"):
        _publish(store, prefix, "r1")
    assert store.read_bytes(manifest_key(prefix)) == corrupt


def test_a_conditional_write_loses_to_a_change_since_the_read(prefix: str) -> None:
    store = _store()
    key = f"{prefix}object.json"
    store.write_conditionally(key=key, text="{}", etag=None)
    with pytest.raises(ObjectChanged):
        store.write_conditionally(key=key, text="{}", etag=None)  # it exists now
    first = store.read_versioned(key)
    assert first is not None
    store.write_text(key=key, text='{"changed": true}')
    with pytest.raises(ObjectChanged):
        store.write_conditionally(key=key, text='{"lost": true}', etag=first.etag)
    assert store.read_text(key) == '{"changed": true}'


def test_an_unreachable_bucket_is_a_clear_error(
    prefix: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    gone = {
        "conn_type": "aws",
        "login": "k",
        "password": "s",
        "extra": {"endpoint_url": "http://127.0.0.1:9"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_AWS_GONE", json.dumps(gone))
    store = ResultsBucketHook(aws_conn_id="aws_gone", bucket="kai-scale-results", max_attempts=2)
    with pytest.raises(
        PublishError, match=r"could not publish run r1 to s3://kai-scale-results/test-"
    ) as raised:
        _publish(store, prefix, "r1")
    assert "Could not connect to the endpoint URL" in str(raised.value)
    assert "manifest entry was not written" in str(raised.value)
    # Each failed attempt is in the log (Airflow's, on stdout), not only the last one's error.
    log = capfd.readouterr().out
    assert "failed on attempt 1 of at most 2 (EndpointConnectionError" in log
    assert "failed on attempt 2 of at most 2 (EndpointConnectionError" in log
    assert "attempt 3" not in log, "max_attempts counts every try"


def test_a_missing_bucket_is_named_by_publishing_and_by_the_wrapper_of_the_tasks_reads(prefix: str) -> None:
    """Publishing, and ``errors_named`` (what collect_metrics and publish_results read through), name it."""
    store = ResultsBucketHook(aws_conn_id="aws_default", bucket="no-such-bucket")
    with pytest.raises(PublishError, match=r"to s3://no-such-bucket/test-.*NoSuchBucket"):
        _publish(store, prefix, "r1")
    with pytest.raises(ClientError, match="NoSuchBucket"):  # an error, never a file taken for gone
        copy_run_files(store, prefix=prefix, run_id="r1", files=["profiles/a/cpu.pb.gz"])
    with (
        pytest.raises(
            BucketError,
            match=(
                r"^could not read the scenarios' outcomes and clear runs/r1/metrics\.json in "
                r"s3://no-such-bucket: .*NoSuchBucket.* credentials of connection 'aws_default', then clear"
            ),
        ),
        store.errors_named("read the scenarios' outcomes and clear runs/r1/metrics.json"),
    ):
        store.delete("runs/r1/metrics.json")


class _FlakyS3(http.server.BaseHTTPRequestHandler):
    """Answers 503 SlowDown to every other request, forwards the rest to the local S3 endpoint."""

    upstream = ""
    requests = 0
    fails_every_other = True

    def _handle(self) -> None:
        type(self).requests += 1
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.fails_every_other and type(self).requests % 2:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        connection = http.client.HTTPConnection(urllib.parse.urlsplit(self.upstream).netloc, timeout=30)
        connection.request(self.command, self.path, body=body, headers=dict(self.headers))
        response = connection.getresponse()
        payload = response.read()
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_PUT = do_HEAD = do_POST = _handle

    def log_message(self, *_: Any) -> None:
        pass


def _local_endpoint(airflow_env: dict[str, str]) -> str:
    """The local S3 endpoint's URL, from the local environment's AWS connection."""
    return str(json.loads(airflow_env["AIRFLOW_CONN_AWS_DEFAULT"])["extra"]["endpoint_url"])


def _store_through(
    port: int, airflow_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> ResultsBucketHook:
    """The results bucket through a stand-in endpoint on ``port`` (connection ``aws_relay``)."""
    connection = json.loads(airflow_env["AIRFLOW_CONN_AWS_DEFAULT"])
    connection["extra"]["endpoint_url"] = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("AIRFLOW_CONN_AWS_RELAY", json.dumps(connection))
    return ResultsBucketHook(aws_conn_id="aws_relay", bucket=localenv_settings.DEFAULT_BUCKET)


def test_transient_s3_errors_are_retried(
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    airflow_on_local_env: dict[str, str],
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Every other request fails with 503 (an S3 endpoint under load); the publish still completes."""
    _FlakyS3.upstream = _local_endpoint(airflow_on_local_env)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FlakyS3)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        store = _store_through(server.server_port, airflow_on_local_env, monkeypatch)
        _publish(store, prefix, "r1")
    finally:
        server.shutdown()
        server.server_close()
    assert _FlakyS3.requests >= 10, "every request went through the flaky endpoint"
    assert "failed on attempt 1 of at most 8 (HTTP 503)" in capfd.readouterr().out, "the log says what failed"
    assert [run["run_id"] for run in _manifest(_store(), prefix)["runs"]] == ["r1"]


class _S3Relay(_FlakyS3):
    """Forwards every request to the local S3 endpoint: the endpoint as a client sees it, that can go down."""

    fails_every_other = False


def test_an_s3_endpoint_down_for_a_minute_loses_nothing(
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    airflow_on_local_env: dict[str, str],
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Connections are refused for 60 s from the start of publishing: nothing listens on the relay's port.

    A publish that gives up meanwhile is published again once the endpoint is back, as clearing
    publish_results does. Either way the run ends published once, whole.
    """
    _S3Relay.upstream = _local_endpoint(airflow_on_local_env)
    # Bound, not listening: the port is held and every connection to it is refused until activated.
    relay = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _S3Relay, bind_and_activate=False)
    relay.server_bind()
    store = _store_through(relay.server_port, airflow_on_local_env, monkeypatch)
    back: list[bool] = []

    def come_back() -> None:
        relay.server_activate()
        threading.Thread(target=relay.serve_forever, daemon=True).start()
        back.append(True)

    timer = threading.Timer(S3_DOWN_SECONDS, come_back)
    timer.start()
    failures: list[str] = []  # each publish that gave up, and whether the endpoint was back by then
    try:
        while True:
            try:
                _publish(store, prefix, "r1")
                break
            except PublishError as error:
                failures.append(f"{'up' if back else 'down'}: {error}")
                if back:
                    break
                wait_for(lambda: bool(back), timeout=S3_DOWN_SECONDS + 30, what="the S3 endpoint to be back")
    finally:
        timer.cancel()
        timer.join()
        if back:
            relay.shutdown()
        relay.server_close()
    assert len(failures) <= 1, failures
    assert all(f.startswith("down:") and "manifest entry was not written" in f for f in failures), failures
    output = capfd.readouterr()
    assert "failed on attempt 1 of at most 8 (EndpointConnectionError" in output.out + output.err
    assert [run["run_id"] for run in _manifest(_store(), prefix)["runs"]] == ["r1"]
    keys = published_keys(prefix=prefix, run_id="r1")
    for key in (keys.results, keys.ginkgo_report, keys.metrics, keys.verdicts):
        assert _store().read_text(key) is not None, key


def _fill(seconds: float) -> list[dict[str, Any]]:
    return [
        {
            "test_name": "Fill Cluster with single GPU Jobs",
            "status": "success",
            "details": {"nodes": 500, "time": f"{seconds:.1f}s"},
        }
    ]


def test_a_run_slower_than_its_history_is_judged_breaches_its_threshold_and_names_what_grew() -> None:
    """Thirty nights of ~400 s Fill Cluster times at 500 nodes, then three at ~480 s (+20 %).

    The last night before it published the scheduler's CPU profile ``cpu_heavy3`` (main.heavy spins 3
    units per unit of main.light); the run's is ``cpu_light3`` (3 units each, twice the rounds): its
    scheduler spent more CPU, and main.light most of what it added.
    """
    store = _store()
    prefix = f"test-{uuid.uuid4().hex[:8]}/Public/"
    noise = random.Random(7)
    times = [400 * (1 + noise.uniform(-0.05, 0.05)) for _ in range(30)] + [480.0, 484.0]
    cpu = profile_file("sanity-fill-cluster", CPU_PROFILE)
    # Its run's outputs under runs/ are the test's own, as its prefix is.
    tonight_id = f"20260099-scheduled-{uuid.uuid4().hex[:8]}"
    for night, seconds in enumerate(times):
        run_id = f"2026{night:04d}-scheduled"
        entry = {
            **_entry(run_id, prefix),
            "timestamp": f"2026-09-{1 + night // 24:02d}T{night % 24:02d}:00:00Z",
            "node_count": 500,
        }
        results = {"metadata": {}, "results": {"status": "success", "tests": _fill(seconds)}}
        if night == len(times) - 1:  # published beside its results, as publish_results copies it
            beside = published_keys(prefix=prefix, run_id=run_id).beside(cpu)
            store.write_bytes(key=beside, data=HEAVY3.read_bytes(), content_type="application/gzip")
        _publish(store, prefix, run_id, results=results, entry=entry)
    store.write_bytes(
        key=run_file_key(tonight_id, cpu), data=LIGHT3.read_bytes(), content_type="application/gzip"
    )
    collected = CollectedProfile(status="collected", file=cpu, summary=summarize(fixture(LIGHT3), "cpu"))
    tonight = ScenarioProfiles(
        status="partial", reason=None, service="kai-scheduler", window=None, profiles={CPU_PROFILE: collected}
    )
    scenario = Scenario.model_validate(
        {
            "name": "sanity-fill-cluster",
            "description": "fill",
            "timeout": "90m",
            "run": {"kind": "ginkgo", "focus": "Fill"},
            "thresholds": [{"test_name": "Fill Cluster with single GPU Jobs", "detail": "time", "max": "7m"}],
        }
    )

    verdicts = judge_run(
        store,
        prefix=prefix,
        run_id=tonight_id,
        node_count=500,
        scenarios=[scenario],
        tests=_fill(490.0),
        scenario_tests={"sanity-fill-cluster": _fill(490.0)},
        include_dir="include",
        profiles=RunProfiles(run_id=tonight_id, scenarios={"sanity-fill-cluster": tonight}),
        run_pods={"sanity-fill-cluster": 4000},
    ).model_dump(mode="json")

    assert verdicts["verdict"] == "threshold", verdicts["reasons"]  # 490 s breaches max 7m (420 s)
    detail = verdicts["tests"]["Fill Cluster with single GPU Jobs"]["time"]
    assert detail["threshold"]["status"] == "breach"
    assert detail["change_point"]["better"] == "lower"
    assert detail["change_point"]["p_value"] <= 0.001
    assert detail["comparison"]["previous"] == 484.0
    assert verdicts["previous_run_ids"] == {"sanity-fill-cluster": "20260031-scheduled"}
    assert any("regressed since run" in reason for reason in verdicts["reasons"])
    profile = verdicts["profiles"]["sanity-fill-cluster"]
    assert (profile["flagged"], profile["reason"]) == (True, None)
    comparison = profile["comparison"]
    assert comparison["run_cpu_seconds"] > 1.2 * comparison["baseline_cpu_seconds"], comparison
    grew = comparison["cumulative_grew"]
    assert grew[0]["function"] == "main.light", grew
    assert grew[0]["run_share"] > 2 * grew[0]["baseline_share"], grew
    (named,) = [reason for reason in verdicts["reasons"] if "KAI's scheduler" in reason]
    assert named.startswith("sanity-fill-cluster: KAI's scheduler CPU "), named
    assert "vs baseline 20260031-scheduled; grew most: main.light +" in named, named
