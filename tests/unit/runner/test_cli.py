"""The runner command end to end on one machine: its outputs go to a real HTTP server taking PUTs.

Only the question put to the cluster (is KAI ready?) is answered by the test.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kai_scale_model import runner_interface as interface
from kai_scale_model.scenario import Scenario
from kai_scale_runner import cli

NOT_INSTALLED = "KAI not installed: CRD queues.scheduling.run.ai not found"
RECLAIM = Scenario.model_validate(
    {"name": "reclaim", "description": "d", "timeout": "5m", "run": {"kind": "ginkgo", "focus": "Reclaim"}}
)


@pytest.fixture
def outputs_server() -> Iterator[tuple[str, dict[str, Any]]]:
    """A server storing each PUT body (JSON) by its path; its base URL and what it received."""
    received: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            received[self.path] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            """Quiet: the runner's own log is what the tests read."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", received
    server.shutdown()
    thread.join()
    server.server_close()


def _run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, base_url: str, *, scenario: Scenario = RECLAIM
) -> int:
    monkeypatch.setenv(interface.SCENARIO_ENV, scenario.model_dump_json())
    monkeypatch.setenv(interface.NODE_COUNT_ENV, "10")
    monkeypatch.setenv(interface.OUTPUT_URLS_ENV, json.dumps({interface.OUTCOME: f"{base_url}/outcome"}))
    monkeypatch.delenv("KAI_COMMIT_HASH", raising=False)
    return cli.main(["run", "--workdir", str(tmp_path)])


def test_a_suite_scenario_without_kai_is_not_run_and_exits_3(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    outputs_server: tuple[str, dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(cli, "_kai_not_ready_reason", lambda: NOT_INSTALLED)
    base_url, received = outputs_server

    assert _run(monkeypatch, tmp_path, base_url) == interface.NOT_RUN_EXIT_CODE == 3
    outcome = received["/outcome"]
    assert (outcome["status"], outcome["reason"], outcome["failure_kind"]) == ("not_run", NOT_INSTALLED, None)
    assert (outcome["kind"], outcome["exit_code"], outcome["tests"]) == ("ginkgo", None, [])
    last_line = capsys.readouterr().out.strip().splitlines()[-1]
    assert last_line == f"scenario reclaim: not_run: {NOT_INSTALLED}", "the pod's termination message"


def test_a_runner_that_crashes_fails_the_scenario_as_infrastructure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, outputs_server: tuple[str, dict[str, Any]]
) -> None:
    def forbidden() -> str:
        raise RuntimeError("Forbidden: pods is forbidden")

    monkeypatch.setattr(cli, "_kai_not_ready_reason", forbidden)
    base_url, received = outputs_server

    assert _run(monkeypatch, tmp_path, base_url) == 1
    outcome = received["/outcome"]
    assert (outcome["status"], outcome["failure_kind"]) == ("failure", "infrastructure")
    assert outcome["reason"] == "the runner crashed: RuntimeError: Forbidden: pods is forbidden"


def test_a_workload_for_kais_scheduler_is_not_run_without_kai(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(cli, "_kai_not_ready_reason", lambda: NOT_INSTALLED)
    scenario = Scenario.model_validate(
        {
            "name": "kai-throughput",
            "description": "d",
            "timeout": "5m",
            "run": {"kind": "workload", "pods_per_node": 1, "scheduler_name": "kai-scheduler"},
        }
    )
    outcome = cli.run_scenario(scenario=scenario, node_count=1, run_id="r", namespace="n", workdir=tmp_path)
    assert (outcome.status, outcome.kind, outcome.reason) == ("not_run", "workload", NOT_INSTALLED)
