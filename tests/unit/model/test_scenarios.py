from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from kai_scale.scenario_files import ScenarioFileError, load_scenario, load_scenarios
from kai_scale_model.durations import format_duration, parse_duration
from kai_scale_model.scenario import GinkgoRun, Scenario, WorkloadRun

SHIPPED = Path(__file__).resolve().parents[3] / "include" / "scenarios"
VALID = """\
name: reclaim
description: reclaim things
run:
  kind: ginkgo
  focus: "Whole GPU Tests Reclaim"
timeout: 1h30m
"""


def _write(tmp_path: Path, text: str, name: str = "reclaim") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90m", timedelta(minutes=90)),
        ("1h30m", timedelta(minutes=90)),
        ("45s", timedelta(seconds=45)),
        ("1.5h", timedelta(minutes=90)),
        ("250ms", timedelta(milliseconds=250)),
        ("6m36.7s", timedelta(minutes=6, seconds=36.7)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["ninety", "", "90", "5x", "1.2.3s", "m"])
def test_bad_duration_says_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match="must be a duration like 90m"):
        parse_duration(text)


@pytest.mark.parametrize(
    "value", [timedelta(minutes=6, seconds=36.7), timedelta(hours=2, seconds=5), timedelta(seconds=7)]
)
def test_a_formatted_duration_parses_back(value: timedelta) -> None:
    assert parse_duration(format_duration(value)) == value


def test_shipped_scenarios_load_and_cover_the_suite_and_a_workload() -> None:
    scenarios = load_scenarios(SHIPPED)
    kinds = {s.name: s.kind for s in scenarios}
    assert kinds == {
        "burst-jobs": "ginkgo",
        "gpu-pod-throughput": "workload",
        "reclaim": "ginkgo",
        "reclaim-full-node": "ginkgo",
        "sanity-fill-cluster": "ginkgo",
        "topology": "ginkgo",
        "whole-gpu-pending-background": "ginkgo",
    }
    # A night runs reclaim whole; its full-node spec alone is for the local scenario set.
    assert [s.name for s in scenarios if not s.enabled] == ["reclaim-full-node"]


def test_valid_file(tmp_path: Path) -> None:
    scenario = load_scenario(_write(tmp_path, VALID))
    assert scenario.run == GinkgoRun(kind="ginkgo", focus="Whole GPU Tests Reclaim")
    assert scenario.timeout == timedelta(minutes=90)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            VALID.replace("1h30m", "ninety"),
            r"'timeout' Value error, must be a duration like 90m, .*got 'ninety'",
        ),
        (VALID.replace("kind: ginkgo", "kind: shell"), r"'run' .*'ginkgo', 'workload'"),
        (VALID.replace('  focus: "Whole GPU Tests Reclaim"\n', ""), r"'run.focus' Field required"),
        (
            VALID.replace('focus: "Whole GPU Tests Reclaim"', 'focus: "("'),
            r"'run.focus' Value error, must be a regular",
        ),
        (VALID + "colour: red\n", r"'colour' Extra inputs are not permitted"),
        (VALID + "env:\n  NODE_COUNT: '3'\n", r"'env' Value error, NODE_COUNT are set by the pipeline"),
        (VALID.replace("name: reclaim", "name: Reclaim_1"), r"'name' String should match pattern"),
        (VALID.replace("name: reclaim", "name: other"), r"'name' must match the file name 'reclaim'"),
        (VALID + "thresholds:\n  - {test_name: Fill, detail: time}\n", r"needs min, max or both"),
        (
            VALID + "thresholds:\n  - {test_name: Fill, detail: time, min: 10m, max: 90s}\n",
            r"min \(10m\) is above max \(90s\)",
        ),
        (
            VALID + "thresholds:\n  - {test_name: Fill, detail: pods, min: 5, max: 4}\n",
            r"min \(5\.0\) is above max \(4\.0\)",
        ),
        ("run: [", r"not valid YAML"),
        ("- a\n- b\n", r"expected a mapping of fields, got list"),
    ],
)
def test_bad_file_names_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ScenarioFileError, match=rf"scenario file {tmp_path}/reclaim.yaml: .*{message}"):
        load_scenario(path)


def test_workload_fields_are_bounded(tmp_path: Path) -> None:
    text = VALID.replace(
        '  kind: ginkgo\n  focus: "Whole GPU Tests Reclaim"\n', "  kind: workload\n  pods_per_node: 0\n"
    )
    with pytest.raises(ScenarioFileError, match=r"'run.pods_per_node' Input should be greater than 0"):
        load_scenario(_write(tmp_path, text))
    ok = load_scenario(_write(tmp_path, text.replace("pods_per_node: 0", "pods_per_node: 4")))
    assert isinstance(ok.run, WorkloadRun)
    assert ok.run.node_selector == {"type": "kwok"}


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioFileError, match="no scenario files"):
        load_scenarios(tmp_path)


def test_scenario_round_trips_through_json_as_the_runner_pod_receives_it() -> None:
    for scenario in load_scenarios(SHIPPED):
        assert type(scenario).model_validate_json(scenario.model_dump_json()) == scenario


@pytest.mark.parametrize(
    ("run", "needs_kai"),
    [
        ({"kind": "ginkgo", "focus": "x"}, True),
        ({"kind": "workload", "pods_per_node": 1, "scheduler_name": "kai-scheduler"}, True),
        ({"kind": "workload", "pods_per_node": 1}, False),
    ],
)
def test_kais_suite_and_workloads_for_kais_scheduler_need_kai(
    run: dict[str, object], needs_kai: bool
) -> None:
    scenario = Scenario.model_validate({"name": "s", "description": "d", "timeout": "5m", "run": run})
    assert scenario.needs_kai is needs_kai
