"""Alerts as real servers receive them: an SMTP server (aiosmtpd) and a webhook (http.server), on loopback.

All but the last test need no local environment: a migrated metadata database, ``dag.test()`` of a
small DAG that fails the way a bad night does (a scenario failed, metrics missing, publishing failed
by its findings), the shipped DAG file's alert run by a real ``airflow dag-processor``, and the
run-time limit's callback run the way the triggerer runs it. The last runs the nightly DAG on the
local environment against a published history it regresses from.
"""

from __future__ import annotations

import asyncio
import contextlib
import email
import email.message
import html
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session
from airflow.sdk import DAG, TriggerRule, task
from airflow.sdk.exceptions import AirflowFailException
from airflow.sdk.log import mask_secret

from kai_scale.alerts.wiring import alert_wiring
from kai_scale.object_keys import manifest_key, published_keys, run_summary_key
from kai_scale.publishing.publisher import PublishError
from kai_scale.publishing.task import RunFailedError
from kai_scale.publishing.xcom import PUBLISH_TASK_ID, RUN_SUMMARY_XCOM_KEY, VERDICTS_XCOM_KEY
from kai_scale.run_id import pipeline_run_id
from kai_scale.settings import PipelineSettings
from tests.conftest import REPO
from tests.failed_night import RECLAIM_REASON, RUN_ID, failed_night
from tests.integration.airflow_env import DAG_ID
from tests.waiting import free_ports, wait_for

pytestmark = pytest.mark.usefixtures("airflow_db")

RECIPIENTS = "kai-oncall@example.com, KAI team <kai-team@example.com>"
SENDER = "kai-scale@example.com"
WEBHOOK_PATH = "/hooks/kai-scale"
WEBHOOK_TOKEN = "hook-token-1234"
# Registered as a secret by the failing task, and in its error: the alert must not carry it.
SECRET = "s3cr3t-upload-signature"
AIRFLOW_BASE_URL = "https://airflow.example.com"
RESULTS_URL = "https://results.example.com/Public/"
UNWRITTEN = f"could not write s3://kai-scale-results/{run_summary_key('r')}: AccessDenied"
BAD_NIGHT_SUBJECT = (
    f"[KAI scale] run {RUN_ID} (500 nodes) failed: 1 scenario failed, 1 threshold breach, "
    "1 regression, 1 threshold on nothing"
)


@dataclass
class Mailbox:
    """What the SMTP server received."""

    port: int
    messages: list[tuple[Envelope, email.message.Message]] = field(default_factory=list)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        content = envelope.content if isinstance(envelope.content, bytes) else b""
        self.messages.append((envelope, email.message_from_bytes(content)))
        return "250 Message accepted for delivery"


@dataclass
class Webhook:
    """What the webhook received: each POST's path, headers and JSON."""

    port: int
    posts: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)


@pytest.fixture(scope="module")
def mailbox() -> Iterator[Mailbox]:
    (port,) = free_ports(1)
    box = Mailbox(port=port)
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    yield box
    controller.stop()


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    received = Webhook(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            received.posts.append((self.path, dict(self.headers), json.loads(body)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    received.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield received
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def alert_settings(mailbox: Mailbox, webhook: Webhook) -> Iterator[None]:
    """The deployment's alert settings and connections, pointing at the two servers."""
    smtp = {
        "conn_type": "smtp",
        "host": "127.0.0.1",
        "port": mailbox.port,
        "extra": {"from_email": SENDER, "disable_ssl": True, "disable_tls": True, "retry_limit": 0},
    }
    hook = {
        "conn_type": "http",
        "host": f"http://127.0.0.1:{webhook.port}{WEBHOOK_PATH}",
        "extra": {"Authorization": f"Bearer {WEBHOOK_TOKEN}"},
    }
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {
            "KAI_SCALE_ALERT_EMAIL_TO": RECIPIENTS,
            "KAI_SCALE_ALERT_SMTP_CONN_ID": "alerts_smtp",
            "AIRFLOW_CONN_ALERTS_SMTP": json.dumps(smtp),
            "KAI_SCALE_ALERT_WEBHOOK_CONN_ID": "alerts_webhook",
            "AIRFLOW_CONN_ALERTS_WEBHOOK": json.dumps(hook),
            "KAI_SCALE_RUN_ALERT_AFTER": "6h",
            "KAI_SCALE_RESULTS_URL": RESULTS_URL,
            "AIRFLOW__API__BASE_URL": AIRFLOW_BASE_URL,
        }.items():
            patch.setenv(name, value)
        yield


def _settings() -> PipelineSettings:
    return PipelineSettings.from_environment(default_include_dir=REPO / "include")


def _bad_night_dag(*, summary_written: bool = True) -> DAG:
    """A small DAG failing like a bad night; its tasks record their errors as the DAG factory wires them.

    Its run's alert is left to the dag-processor, with the shipped DAG file's alerts: ``dag.test()``
    cannot run a DAG's notifiers (apache/airflow#64649: the callback context it builds carries the
    SerializedDAG, which cannot render templates), nor give a callback the task SDK's channel to
    Airflow that the dag-processor gives it.
    """
    alerts = alert_wiring(_settings())
    summary, verdicts = failed_night()
    with DAG(
        dag_id=DAG_ID,  # dag.test() needs a DAG of this id in the DAGs folder
        schedule=None,
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        default_args={"retries": 0, **alerts.default_args},
    ) as dag:

        @task
        def run_reclaim() -> None:
            raise AirflowFailException(f"scenario reclaim failed: {RECLAIM_REASON}")

        @task(trigger_rule=TriggerRule.ALL_DONE)
        def collect_metrics() -> None:
            raise RuntimeError("Prometheus at http://127.0.0.1:9 is unreachable")

        @task(task_id=PUBLISH_TASK_ID, trigger_rule=TriggerRule.ALL_DONE)
        def publish_results(**context: Any) -> None:
            if not summary_written:
                raise PublishError(
                    f"could not write s3://kai-scale-results/{run_summary_key('r')}: AccessDenied"
                )
            mask_secret(SECRET)
            context["ti"].xcom_push(key=RUN_SUMMARY_XCOM_KEY, value=summary)
            context["ti"].xcom_push(key=VERDICTS_XCOM_KEY, value=verdicts)
            raise RunFailedError(
                f"run published to s3://kai-scale-results/Public/{RUN_ID}/results.json?sig={SECRET}, "
                f"with problems: reclaim: {RECLAIM_REASON}"
            )

        run_reclaim() >> collect_metrics() >> publish_results()
    return dag


@pytest.fixture(scope="module")
def bad_night(alert_settings: None) -> Any:
    """The small DAG's failed run: its tasks' failure callbacks have recorded their errors."""
    dag_run = _bad_night_dag().test()
    assert dag_run.state == "failed"
    return dag_run


@pytest.fixture(scope="module")
def publishing_failed_early(alert_settings: None) -> Any:
    """A failed run whose publish_results failed before it wrote the run summary."""
    dag_run = _bad_night_dag(summary_written=False).test(run_conf={"node_count": 500})
    assert dag_run.state == "failed"
    return dag_run


def _html_body(message: email.message.Message) -> str:
    (part,) = [p for p in message.walk() if p.get_content_type() == "text/html"]
    payload = part.get_payload(decode=True)
    assert isinstance(payload, bytes)
    return payload.decode(part.get_content_charset() or "utf-8")


def _text_of(body: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", body))


def _assert_the_bad_night_alert(
    envelope: Envelope,
    message: email.message.Message,
    post: tuple[str, dict[str, str], Any],
    airflow_run_id: str,
) -> None:
    assert message["Subject"] == BAD_NIGHT_SUBJECT
    assert message["From"] == SENDER
    assert message["To"] == RECIPIENTS
    assert envelope.rcpt_tos == ["kai-oncall@example.com", "kai-team@example.com"]
    body = _html_body(message)
    text = _text_of(body)
    assert f"  - reclaim: {RECLAIM_REASON}" in text
    assert "  - 'Fill Cluster with single GPU Jobs' / 'time': 490 > max 420 (previous run: 484)" in text
    assert (
        "'Fill Cluster with single GPU Jobs' / 'time': 395.683 -> 484.667 (+22.5 %, lower is better" in text
    )
    assert f"  - run_reclaim: AirflowFailException: scenario reclaim failed: {RECLAIM_REASON}" in text
    assert "  - collect_metrics: RuntimeError: Prometheus at http://127.0.0.1:9 is unreachable" in text
    assert "  - publish_results: RunFailedError: run published to" in text
    assert SECRET not in text, "a secret the task registered is masked in its recorded error"
    assert "?sig=***" in text
    airflow_url = (
        f"{AIRFLOW_BASE_URL}/dags/{DAG_ID}/runs/{airflow_run_id.replace(':', '%3A').replace('+', '%2B')}"
    )
    assert f'<a href="{airflow_url}">' in body
    assert f"Results:      {RESULTS_URL}{RUN_ID}/results.json" in text
    assert f"Verdicts:     {RESULTS_URL}{RUN_ID}/verdicts.json" in text

    path, headers, payload = post
    assert path == WEBHOOK_PATH
    assert headers["Authorization"] == f"Bearer {WEBHOOK_TOKEN}"
    assert headers["Content-Type"] == "application/json"
    assert payload["subject"] == BAD_NIGHT_SUBJECT
    assert payload["text"] == text, "the webhook says what the mail says"
    assert payload["event"] == "failed"
    assert (payload["run_id"], payload["airflow_run_id"], payload["node_count"]) == (
        RUN_ID,
        airflow_run_id,
        500,
    )
    assert payload["failed_scenarios"] == [
        {"scenario": "reclaim", "reason": RECLAIM_REASON, "failure_kind": "scenario"}
    ]
    (regression,) = payload["regressions"]
    assert (regression["detail"], regression["better"]) == ("time", "lower")
    assert regression["p_value"] <= 0.001
    assert [t["task_id"] for t in payload["failed_tasks"]] == [
        "collect_metrics",
        "publish_results",
        "run_reclaim",
    ]
    assert payload["links"]["airflow_run"] == airflow_url


def _scheduler_callback_request(airflow_run: Any) -> None:
    """Store the request the scheduler makes when the run fails, as its callback sink stores it."""
    from airflow.callbacks.database_callback_sink import DatabaseCallbackSink  # noqa: PLC0415
    from airflow.models.dagrun import DagRun  # noqa: PLC0415
    from airflow.models.serialized_dag import SerializedDagModel  # noqa: PLC0415
    from airflow.utils.session import create_session  # noqa: PLC0415

    with create_session() as session:
        dag_run = session.get(DagRun, airflow_run.id)
        serialized = SerializedDagModel.get_dag(DAG_ID, session=session)
        assert dag_run is not None
        assert serialized is not None
        request = dag_run.produce_dag_callback(
            dag=serialized,
            success=False,
            relevant_ti=dag_run.get_task_instance(PUBLISH_TASK_ID, session=session),
            reason="task_failure",
            execute=False,
        )
        assert request is not None
        DatabaseCallbackSink().send(request, session=session)


def _run_dag_processor_until_alerted(
    mailbox: Mailbox, webhook: Webhook, *, count: int, log_path: Path
) -> None:
    """Run ``airflow dag-processor`` (with this environment: the alert settings) until ``count`` alerts."""
    with log_path.open("wb") as log:
        processor = subprocess.Popen(
            [str(Path(sys.executable).parent / "airflow"), "dag-processor"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(
            lambda: (len(mailbox.messages) == len(webhook.posts) == count) or processor.poll() is not None,
            timeout=240,
            what=f"the dag-processor's {count} alert(s) (its log: {log_path})",
            interval=1,
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(processor.pid, signal.SIGTERM)
        try:
            processor.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(processor.pid, signal.SIGKILL)
            processor.wait(timeout=30)
    assert len(mailbox.messages) == count, f"the dag-processor's log: {log_path.read_text()[-4000:]}"
    assert len(webhook.posts) == count


def test_the_dag_processor_alerts_with_the_shipped_dag_file(
    bad_night: Any, publishing_failed_early: Any, mailbox: Mailbox, webhook: Webhook, tmp_path: Path
) -> None:
    """The production path: the scheduler's callback requests, a real dag-processor, the shipped DAG file.

    The dag-processor parses dags/kai_scale_nightly.py with the alert settings in its environment and
    runs the alerts that DAG carries, for both failed runs: the bad night (its summary and verdicts
    read from XCom) and the run whose publishing failed before any summary (what Airflow knows).
    """
    mailbox.messages.clear()
    webhook.posts.clear()
    _scheduler_callback_request(bad_night)
    _scheduler_callback_request(publishing_failed_early)
    _run_dag_processor_until_alerted(mailbox, webhook, count=2, log_path=tmp_path / "dag-processor.log")
    by_run = {post[2]["airflow_run_id"]: post for post in webhook.posts}
    mails = {m["Subject"]: (envelope, m) for envelope, m in mailbox.messages}

    envelope, message = mails[BAD_NIGHT_SUBJECT]
    _assert_the_bad_night_alert(envelope, message, by_run[bad_night.run_id], bad_night.run_id)

    run_id = pipeline_run_id(
        airflow_run_id=publishing_failed_early.run_id, run_after=publishing_failed_early.run_after
    )
    failed_tasks = "collect_metrics, publish_results, run_reclaim"
    envelope, message = mails[f"[KAI scale] run {run_id} (500 nodes) failed: failed tasks {failed_tasks}"]
    text = _text_of(_html_body(message))
    assert "publish_results wrote no run summary: below is what Airflow knows of the run." in text
    assert f"  - run_reclaim: AirflowFailException: scenario reclaim failed: {RECLAIM_REASON}" in text
    assert f"  - publish_results: PublishError: {UNWRITTEN}" in text
    assert "Results:" not in text
    payload = by_run[publishing_failed_early.run_id][2]
    assert payload["text"] == text
    assert payload["summary_written"] is False
    assert payload["links"]["results"] is None


def _deadline_context(dag_run_id: int, *, state: str) -> dict[str, Any]:
    """The context the scheduler gives a deadline's callback (``Deadline.handle_miss``), run in ``state``."""
    from airflow.api_fastapi.core_api.datamodels.dag_run import DAGRunResponse  # noqa: PLC0415
    from airflow.models.dagrun import DagRun  # noqa: PLC0415
    from airflow.utils.session import create_session  # noqa: PLC0415

    with create_session() as session:
        dag_run = DAGRunResponse.model_validate(session.get(DagRun, dag_run_id)).model_dump(mode="json")
    return {
        "dag_run": {**dag_run, "state": state},
        "deadline": {"id": str(uuid.uuid4()), "deadline_time": datetime.now(UTC).isoformat()},
    }


def _run_deadline_callbacks(context: dict[str, Any]) -> list[dict[str, Any]]:
    """Each deadline's callback as stored with the DAG, run by the triggerer's CallbackTrigger."""
    from airflow.triggers.callback import CallbackTrigger  # noqa: PLC0415

    deadlines = alert_wiring(_settings()).dag_arguments["deadline"]
    assert len(deadlines) == 2, "one per channel"

    async def run(stored: dict[str, Any]) -> list[dict[str, Any]]:
        trigger = CallbackTrigger(
            callback_path=stored["path"], callback_kwargs={**stored["kwargs"], "context": context}
        )
        return [event.payload async for event in trigger.run()]

    outcomes = []
    for deadline in deadlines:
        stored = json.loads(json.dumps(deadline.callback.serialize()))
        outcomes += asyncio.run(run(stored))
    return outcomes


def test_a_run_past_its_time_limit_is_mailed_and_posted_by_its_deadline(
    bad_night: Any, mailbox: Mailbox, webhook: Webhook
) -> None:
    mailbox.messages.clear()
    webhook.posts.clear()
    outcomes = _run_deadline_callbacks(_deadline_context(bad_night.id, state="running"))
    assert [o["state"] for o in outcomes] == ["running", "success"] * 2, outcomes
    wait_for(lambda: mailbox.messages and webhook.posts, timeout=30, what="the overdue alert")
    ((_, message),) = mailbox.messages
    run_id = pipeline_run_id(airflow_run_id=bad_night.run_id, run_after=bad_night.run_after)
    assert re.fullmatch(
        rf"\[KAI scale\] run {run_id} \(500 nodes\) still running after \S+ \(limit 6h\)",
        message["Subject"],
    ), message["Subject"]
    (post,) = webhook.posts
    _, _, payload = post
    assert payload["event"] == "overdue"
    assert payload["subject"] == message["Subject"]
    assert payload["limit_seconds"] == 6 * 3600
    assert payload["airflow_run_id"] == bad_night.run_id


def test_a_run_that_already_failed_gets_no_overdue_alert(
    bad_night: Any, mailbox: Mailbox, webhook: Webhook
) -> None:
    """Airflow keeps a failed run's deadlines: when one passes, the failure alert has said it all."""
    mailbox.messages.clear()
    webhook.posts.clear()
    outcomes = _run_deadline_callbacks(_deadline_context(bad_night.id, state="failed"))
    assert [o["state"] for o in outcomes] == ["running", "success"] * 2, outcomes
    assert mailbox.messages == []
    assert webhook.posts == []


def _publish_history(prefix: str, seconds: list[float]) -> None:
    """Nights of the stand-in suite's Fill Cluster test at 20 nodes, published as publish_results does."""
    from kai_scale.hooks.results_bucket import ResultsBucketHook  # noqa: PLC0415
    from kai_scale.publishing.publisher import publish_run  # noqa: PLC0415
    from localenv import settings as localenv_settings  # noqa: PLC0415

    store = ResultsBucketHook(aws_conn_id="aws_default", bucket=localenv_settings.DEFAULT_BUCKET)
    for night, value in enumerate(seconds):
        run_id = f"2026{night:04d}-scheduled"
        tests = [
            {
                "test_name": "Fill Cluster with single GPU Jobs",
                "status": "success",
                "details": {"nodes": 20, "jobs": 160, "time": f"{value:.1f}s"},
            }
        ]
        publish_run(
            store,
            prefix=prefix,
            run_id=run_id,
            results={"metadata": {}, "results": {"status": "success", "tests": tests}},
            metrics_text=json.dumps({"run_id": run_id, "scenarios": {}}),
            verdicts={"run_id": run_id, "verdict": "pass", "reasons": [], "tests": {}},
            ginkgo_report_keys={},
            entry={
                "timestamp": f"2026-09-{1 + night // 24:02d}T{night % 24:02d}:00:00Z",
                "path": f"{prefix}{run_id}/results.json",
                "commit": "abc",
                "run_id": run_id,
                "node_count": 20,
                "status": "success",
            },
        )


def _assert_published_as_a_regression(prefix: str, run_id: str) -> None:
    """What the bucket holds of the regressing run: its verdicts.json and its manifest entry."""
    from kai_scale.hooks.results_bucket import ResultsBucketHook  # noqa: PLC0415
    from localenv import settings as localenv_settings  # noqa: PLC0415

    store = ResultsBucketHook(aws_conn_id="aws_default", bucket=localenv_settings.DEFAULT_BUCKET)
    keys = published_keys(prefix=prefix, run_id=run_id)
    text = store.read_text(keys.verdicts)
    assert text is not None, f"{keys.verdicts} was not published"
    verdicts = json.loads(text)
    assert (verdicts["run_id"], verdicts["node_count"], verdicts["verdict"]) == (run_id, 20, "regression")
    (reason,) = verdicts["reasons"]
    assert "'Fill Cluster with single GPU Jobs' / 'time' regressed since run 20260030-scheduled" in reason
    time = verdicts["tests"]["Fill Cluster with single GPU Jobs"]["time"]
    change = time["change_point"]
    assert (change["since_run_id"], change["better"]) == ("20260030-scheduled", "lower")
    assert change["p_value"] <= 0.001
    assert change["current"] == pytest.approx((395.0 + 398.0 + 396.737854402) / 3)
    # The stand-in scenario's previous comparable run is the newest night of the history.
    assert verdicts["previous_run_ids"] == {"standin-pass": "20260031-scheduled"}
    assert time["comparison"]["previous_run_id"] == "20260031-scheduled"
    assert time["comparison"]["previous"] == 398.0
    assert time["comparison"]["current"] == pytest.approx(396.737854402)

    manifest_text = store.read_text(manifest_key(prefix))
    assert manifest_text is not None
    (entry,) = [run for run in json.loads(manifest_text)["runs"] if run.get("run_id") == run_id]
    # The scenario passed (status), the run regressed (verdict).
    assert (entry["status"], entry["verdict"], entry["node_count"]) == ("success", "regression", 20)
    assert entry["path"] == keys.results


@pytest.mark.usefixtures("airflow_on_local_env", "kai", "alert_settings")
def test_a_regressing_nightly_run_fails_after_publishing_and_is_alerted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mailbox: Mailbox, webhook: Webhook
) -> None:
    """History in the bucket; a nightly run regresses, fails after publishing and is alerted.

    The issue's whole path: the run is flagged against the history it finds in the local bucket,
    fails after publishing, and its alert reaches the mail server and the webhook.

    The stand-in suite reports Fill Cluster in 6m36.7s (396.7 s); the history has thirty nights near
    300 s and two at the new level, so tonight completes a +32 % change that started two runs ago.
    """
    from tests.integration.airflow_env import include_dir_with, nightly_dag, standin_scenario  # noqa: PLC0415

    prefix = f"test-{uuid.uuid4().hex[:8]}/Public/"  # a manifest of its own: other runs judge nothing here
    monkeypatch.setenv("KAI_SCALE_RESULTS_PREFIX", prefix)
    noise = random.Random(11)
    _publish_history(prefix, [300 * (1 + noise.uniform(-0.05, 0.05)) for _ in range(30)] + [395.0, 398.0])
    include = include_dir_with(tmp_path, {"standin-pass": standin_scenario("pass")})

    dag_run = nightly_dag(include).test(run_conf={"node_count": 20})

    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states["run_standin_pass"] == "success"
    assert states["publish_results"] == "failed", "published, then failed by the regression"
    assert states["tear_down_environment"] == "success"
    assert dag_run.state == "failed", states
    summary = dag_run.get_task_instance("publish_results").xcom_pull(
        task_ids="publish_results", key=RUN_SUMMARY_XCOM_KEY
    )
    assert summary["verdict"] == "regression", summary["verdict_reasons"]
    _assert_published_as_a_regression(prefix, summary["run_id"])
    # dag.test() cannot run the DAG's notifiers (apache/airflow#64649); the dag-processor does.
    mailbox.messages.clear()
    webhook.posts.clear()
    _scheduler_callback_request(dag_run)
    _run_dag_processor_until_alerted(mailbox, webhook, count=1, log_path=tmp_path / "dag-processor.log")

    ((_, message),) = mailbox.messages
    assert message["Subject"] == f"[KAI scale] run {summary['run_id']} (20 nodes) failed: 1 regression"
    text = _text_of(_html_body(message))
    regression = next(
        line for line in text.splitlines() if "'Fill Cluster with single GPU Jobs' / 'time'" in line
    )
    assert re.search(r": [23]\d\d(\.\d+)? -> 39\d(\.\d+)? \(\+3\d\.\d %, lower is better, p=", regression), (
        regression
    )
    assert "since run 20260030-scheduled" in regression
    assert f"Results:      {RESULTS_URL}{summary['run_id']}/results.json" in text
    (post,) = webhook.posts
    payload = post[2]
    assert payload["verdict"] == "regression"
    (found,) = payload["regressions"]
    assert (found["detail"], found["better"], found["since_run_id"]) == (
        "time",
        "lower",
        "20260030-scheduled",
    )
    assert found["p_value"] <= 0.001
    errors = {task["task_id"]: task["error"] for task in payload["failed_tasks"]}
    assert "regressed since run 20260030-scheduled" in errors["publish_results"]
