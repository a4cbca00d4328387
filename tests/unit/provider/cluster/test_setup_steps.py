"""The table of setup steps: what the DAG's setup group, its docs and a step's task are derived from."""

from __future__ import annotations

import logging
import re

import pytest

from kai_scale.cluster.inventory import Inventory
from kai_scale.cluster.tasks import SETUP_STEPS, SetupStep, setup_step
from kai_scale.params import ParamError
from kai_scale.settings import PipelineSettings
from tests.conftest import REPO

ARCHITECTURE = REPO / "docs" / "architecture.md"
STEP_ROW = re.compile(r"^\| `setup\.(\w+)` \| (.*) \|$", re.MULTILINE)
# The DAG's picture: "setup: a → b\n       → c (a branch)\n   → run_<scenario> ...".
PICTURE = re.compile(r"^setup: (.*?)\n   → run_<scenario>", re.MULTILINE | re.DOTALL)


@pytest.fixture
def settings() -> PipelineSettings:
    return PipelineSettings.from_environment(default_include_dir=REPO / "include")


def test_the_docs_table_of_setup_steps_is_the_table() -> None:
    rows = [(f"`setup.{step.task_id}`", step.summary) for step in SETUP_STEPS]
    expected = "\n".join(f"| {task_id} | {summary} |" for task_id, summary in rows)
    documented = [
        (f"`setup.{task_id}`", summary) for task_id, summary in STEP_ROW.findall(ARCHITECTURE.read_text())
    ]
    assert documented == rows, f"docs/architecture.md's table of setup steps must read:\n{expected}"


def test_the_docs_picture_of_the_dag_has_the_setup_steps_in_order() -> None:
    match = PICTURE.search(ARCHITECTURE.read_text())
    assert match, "docs/architecture.md's picture of the DAG starts with 'setup: ' and its steps"
    pictured = [part.strip().removesuffix(" (a branch)") for part in match.group(1).split("→")]
    assert pictured == [step.task_id for step in SETUP_STEPS]
    assert match.group(1).rstrip().endswith("(a branch)") == SETUP_STEPS[-1].branch


def test_the_scenarios_follow_the_last_step_the_one_branch() -> None:
    assert [step.branch for step in SETUP_STEPS] == [False] * (len(SETUP_STEPS) - 1) + [True]
    assert len({step.task_id for step in SETUP_STEPS}) == len(SETUP_STEPS), "task ids are unique"
    for step in SETUP_STEPS:
        assert re.fullmatch(r"[a-z]+(_[a-z0-9]+)+", step.task_id), f"verb_noun: {step.task_id}"
        assert "\n" not in step.summary, f"one line: {step.task_id}"


def test_an_unknown_step_is_refused_naming_the_steps() -> None:
    with pytest.raises(
        KeyError, match=r"no setup step 'install_kai'; the steps are check_cluster, install_kwok"
    ):
        setup_step("install_kai")


def test_refused_params_never_reach_the_cluster(settings: PipelineSettings) -> None:
    """The connection is not even looked up: the params are checked before the first request."""
    with pytest.raises(ParamError, match="node_cout"):
        setup_step("check_cluster").run(
            settings=settings, params={"node_cout": 5, "scenarios": ["reclaim"]}, scenario_names=["reclaim"]
        )


def test_a_step_logs_its_lines_and_returns_them(
    settings: PipelineSettings, caplog: pytest.LogCaptureFixture
) -> None:
    step = SetupStep(task_id="check_things", summary="Things.", body=lambda _cluster, _given: ["one", "two"])
    with caplog.at_level(logging.INFO, logger="kai_scale.cluster.tasks"):
        done = step.run(settings=settings)
    assert (done.lines, done.xcom) == (["one", "two"], ["one", "two"])
    assert [record.getMessage() for record in caplog.records] == ["one", "two"]


def test_an_inventory_is_logged_as_its_lines_and_returned_as_its_dict(
    settings: PipelineSettings, caplog: pytest.LogCaptureFixture
) -> None:
    inventory = Inventory(
        server_version="v1.34.1",
        kai_installed=False,
        kai_deployments=(),
        kwok_installed=True,
        nodepool_crd=True,
        prometheus_operator=False,
        helm_on_worker=True,
        existing={"Queue.scheduling.run.ai/v2": ["default"]},
    )
    step = SetupStep(task_id="take_stock", summary="Stock.", body=lambda _cluster, _given: inventory)
    with caplog.at_level(logging.INFO, logger="kai_scale.cluster.tasks"):
        done = step.run(settings=settings)
    assert done.xcom == inventory.to_dict()
    assert done.lines == inventory.lines() == [record.getMessage() for record in caplog.records]
