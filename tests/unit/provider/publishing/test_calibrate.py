"""``make calibrate`` against a bucket (a moto server: see conftest.py), through an Airflow connection."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.object_keys import manifest_key, published_keys
from kai_scale.publishing.calibrate import main
from tests.conftest import REPO
from tests.unit.provider.publishing.published_runs import PREFIX, failed_scenario, publish, suite_test
from tests.waiting import free_ports


def _use(monkeypatch: pytest.MonkeyPatch, bucket: ResultsBucketHook) -> None:
    """The DAG's settings, pointed at ``bucket``."""
    monkeypatch.setenv("KAI_SCALE_AWS_CONN_ID", bucket.aws_conn_id)
    monkeypatch.setenv("KAI_SCALE_RESULTS_BUCKET", bucket.bucket)
    monkeypatch.setenv("KAI_SCALE_RESULTS_PREFIX", PREFIX.rstrip("/"))


def test_the_command_prints_thresholds_proposed_from_the_runs_in_the_bucket(
    results_bucket: ResultsBucketHook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command as ``make calibrate`` runs it: on stdout the YAML alone, Airflow's logs on stderr."""
    publish(results_bucket, night=0, tests=[suite_test("Fill", 90)])
    publish(results_bucket, night=1, tests=[suite_test("Fill", 100)])
    publish(results_bucket, night=2, tests=[suite_test("Fill", 777)])
    publish(results_bucket, night=3, tests=[suite_test("Fill", 110)])
    publish(results_bucket, night=4, tests=[suite_test("Fill", 999), failed_scenario("fill")])
    publish(results_bucket, night=5, tests=[suite_test("Fill", 999)], node_count=100)
    results_bucket.write_text(key=published_keys(prefix=PREFIX, run_id="r2").results, text='{"trunc')
    _use(monkeypatch, results_bucket)

    command = subprocess.run(
        [sys.executable, "-m", "kai_scale.publishing.calibrate", "--node-count", "500", "--last", "3"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )

    assert command.returncode == 0, command.stderr
    assert command.stdout.startswith("# proposed: median of the last runs"), command.stdout
    # r1 and r3 (r2's results.json is unreadable): median 105 s, plus 20 %.
    assert yaml.safe_load(command.stdout)["thresholds"] == [
        {"test_name": "Fill", "detail": "time", "max": 126}
    ]
    assert "run r2: results.json at Public/r2/results.json unreadable" in command.stderr
    assert f"2 runs at 500 nodes from s3://{results_bucket.bucket}/Public/ (r1 .. r3)" in command.stderr


def _refused(capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["--node-count", "500"]) == 2
    return capsys.readouterr().err


def test_a_missing_manifest_is_named(
    results_bucket: ResultsBucketHook, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _use(monkeypatch, results_bucket)
    err = _refused(capsys)
    assert f"s3://{results_bucket.bucket}/Public/manifest.json does not exist" in err
    assert "KAI_SCALE_RESULTS_PREFIX" in err


def test_a_corrupt_manifest_is_named(
    results_bucket: ResultsBucketHook, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    results_bucket.write_text(key=manifest_key(PREFIX), text='{"runs": [')
    _use(monkeypatch, results_bucket)
    assert "Public/manifest.json is not valid JSON" in _refused(capsys)


def test_no_run_at_the_node_count_names_the_published_ones(
    results_bucket: ResultsBucketHook, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    publish(results_bucket, night=0, tests=[suite_test("Fill", 90)], node_count=100)
    _use(monkeypatch, results_bucket)
    assert "no successful run at 500 nodes (node counts published: 100)" in _refused(capsys)


def test_an_unreachable_bucket_names_the_connection(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (port,) = free_ports(1)
    connection = {
        "conn_type": "aws",
        "login": "unit-test-key",
        "password": "unit-test-secret",
        "extra": {"endpoint_url": f"http://127.0.0.1:{port}", "region_name": "us-east-1"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_KAI_SCALE_NOWHERE", json.dumps(connection))
    monkeypatch.setenv("KAI_SCALE_AWS_CONN_ID", "kai_scale_nowhere")
    monkeypatch.setenv("KAI_SCALE_RESULTS_BUCKET", "kai-scale-results")
    err = _refused(capsys)
    assert "cannot read s3://kai-scale-results/Public/manifest.json" in err
    assert "Airflow connection 'kai_scale_nowhere' (KAI_SCALE_AWS_CONN_ID)" in err


@pytest.mark.parametrize("arguments", [["--last", "0"], ["--margin", "1.5"]])
def test_bad_arguments_are_refused_before_the_bucket_is_read(
    arguments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--node-count", "500", *arguments])
    assert exit_.value.code == 2
    assert "--last must be at least 1 and --margin in [0, 1)" in capsys.readouterr().err


def _include_with_scenario(tmp_path: Path, text: str) -> Path:
    """The shipped include/ (its settings are checked: the tuning profile), with this one scenario."""
    include = tmp_path / "include"
    shutil.copytree(REPO / "include", include, ignore=shutil.ignore_patterns("scenarios"))
    (include / "scenarios").mkdir()
    (include / "scenarios" / "fill.yaml").write_text(text)
    return include


FILL_SCENARIO = """
name: fill
description: the suite's Fill spec
run: {kind: ginkgo, focus: Fill}
timeout: 30m
"""


def test_a_scenarios_detail_rule_puts_the_bound_on_its_bad_side(
    results_bucket: ResultsBucketHook,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """A ``time`` better higher (the scenario's rule) gets a ``min``, as its verdicts judge it."""
    for night, seconds in enumerate((90, 100, 110)):
        publish(results_bucket, night=night, tests=[suite_test("Fill", seconds)])
    _use(monkeypatch, results_bucket)
    rule = "detail_rules:\n  - {test_name: Fill, detail: time, better: higher}\n"
    monkeypatch.setenv("KAI_SCALE_INCLUDE_DIR", str(_include_with_scenario(tmp_path, FILL_SCENARIO + rule)))
    assert main(["--node-count", "500"]) == 0
    out = capsys.readouterr().out  # in-process, Airflow's log lines come first
    proposal = yaml.safe_load(out[out.index("# proposed") :])
    assert proposal["thresholds"] == [{"test_name": "Fill", "detail": "time", "min": 80}]


def test_a_bad_scenario_file_is_named_before_the_bucket_is_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rule = "detail_rules:\n  - {test_name: Fill, detail: time, better: sideways}\n"
    monkeypatch.setenv("KAI_SCALE_INCLUDE_DIR", str(_include_with_scenario(tmp_path, FILL_SCENARIO + rule)))
    monkeypatch.setenv("KAI_SCALE_RESULTS_BUCKET", "no-bucket-is-read")
    err = _refused(capsys)
    assert "fill.yaml" in err
    assert "better" in err
