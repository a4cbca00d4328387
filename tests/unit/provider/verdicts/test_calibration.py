from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kai_scale.verdicts.calibrate import main
from kai_scale.verdicts.calibration import propose_thresholds


def _tests(time: str, rate: float) -> list[dict[str, object]]:
    return [{"test_name": "Fill", "status": "success", "details": {"time": time, "pods per second": rate}}]


def test_bounds_are_the_median_plus_a_margin_in_the_bad_direction() -> None:
    runs = [_tests("100s", 500), _tests("1m50s", 400), _tests("2m0s", 600), _tests("10m", 1)]
    proposals = propose_thresholds(runs[:3], last=3, margin=0.1)
    assert proposals == [
        {"test_name": "Fill", "detail": "pods per second", "min": 450.0, "runs": 3},
        {"test_name": "Fill", "detail": "time", "max": 121.0, "runs": 3},
    ]


def test_the_command_prints_scenario_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entries = []
    for index, (time, nodes) in enumerate([("100s", 500), ("110s", 500), ("999s", 100)]):
        run_id = f"r{index}"
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "results.json").write_text(json.dumps({"results": {"tests": _tests(time, 500)}}))
        entries.append({"run_id": run_id, "node_count": nodes, "status": "success"})
    (tmp_path / "manifest.json").write_text(json.dumps({"runs": entries}))
    assert main([str(tmp_path), "--node-count", "500", "--margin", "0.2"]) == 0
    thresholds = yaml.safe_load(capsys.readouterr().out)["thresholds"]
    assert {"test_name": "Fill", "detail": "time", "max": 126} in thresholds


def test_a_missing_history_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path), "--node-count", "500"]) == 2
    assert "manifest.json" in capsys.readouterr().err
