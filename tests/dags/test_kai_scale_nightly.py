"""The DAG as Airflow loads it: import, policy, task graph for the shipped scenarios, params."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
from airflow.dag_processing.dagbag import DagBag
from airflow.providers.standard.operators.python import BranchPythonOperator
from airflow.sdk import DAG
from airflow.sdk.bases.decorator import DecoratedOperator
from airflow.sdk.definitions.param import ParamsDict
from airflow.sdk.exceptions import ParamValidationError
from airflow.serialization.serialized_objects import DagSerialization

from kai_scale.alerts.run_records import record_task_failure
from kai_scale.cluster.tasks import SETUP_STEPS
from kai_scale.notifications.run_alerts import RunAlertEmailNotifier, RunAlertWebhookNotifier
from kai_scale.operators.scenario_pod import ScenarioPodOperator
from kai_scale.scenario_files import load_scenarios
from tests.conftest import REPO

SCENARIOS = load_scenarios(REPO / "include" / "scenarios")


@pytest.fixture(scope="module")
def dagbag() -> DagBag:
    return DagBag(dag_folder=str(REPO / "dags"))


@pytest.fixture(scope="module")
def dag(dagbag: DagBag) -> Any:
    return dagbag.dags["kai_scale_nightly"]


def test_dags_import_without_errors(dagbag: DagBag) -> None:
    assert dagbag.import_errors == {}
    assert list(dagbag.dags) == ["kai_scale_nightly"]


def test_policy(dag: DAG) -> None:
    assert dag.catchup is False
    assert dag.max_active_runs == 1
    assert dag.max_active_tasks == 1, "scenarios share one cluster: one task at a time"
    assert set(dag.tags) >= {"kai-scheduler", "scale-test"}
    assert (dag.doc_md or "").lstrip().startswith("# KAI scheduler nightly scale tests")
    assert str(dag.schedule) == "@daily"
    for task in dag.tasks:
        assert task.retries is not None, task.task_id


def test_task_graph_for_the_shipped_scenarios(dag: DAG) -> None:
    setups = [t for t in dag.tasks if t.is_setup]
    assert [t.task_id for t in setups] == [f"setup.{step.task_id}" for step in SETUP_STEPS], "in order"
    for step, setup_task in zip(SETUP_STEPS, setups, strict=True):
        assert isinstance(setup_task, DecoratedOperator), step.task_id
        assert setup_task.doc_md == step.summary
        assert isinstance(setup_task, BranchPythonOperator) == step.branch, step.task_id
        assert setup_task.multiple_outputs == step.multiple_outputs, step.task_id
        assert setup_task.retries == 2, step.task_id
    scenario_tasks = [t for t in dag.tasks if isinstance(t, ScenarioPodOperator)]
    assert sorted(t.scenario.name for t in scenario_tasks) == sorted(s.name for s in SCENARIOS)
    by_priority = sorted(scenario_tasks, key=lambda t: -t.priority_weight)
    assert [t.scenario.name for t in by_priority] == sorted(s.name for s in SCENARIOS), "a fixed order"
    assert {t.weight_rule for t in scenario_tasks} == {"absolute"}
    for task in scenario_tasks:
        assert not set(task.upstream_task_ids) & {t.task_id for t in scenario_tasks}, (
            "no scenario waits for another: clearing one must not clear the next"
        )
    assert isinstance(dag.get_task("setup.wait_for_nodes"), BranchPythonOperator), (
        "the scenarios not selected are skipped by the scheduler, without a worker pod each"
    )
    for task in scenario_tasks:
        assert task.upstream_task_ids == {"setup.wait_for_nodes"}, (
            "siblings: a failure blocks no other scenario"
        )
        assert task.downstream_task_ids == {"collect_metrics"}
        assert task.retries == 1, "for a lost worker only: the retry reattaches to the running pod"
    metrics = dag.get_task("collect_metrics")
    assert metrics.downstream_task_ids == {"publish_results"}
    publish = dag.get_task("publish_results")
    for results_task in (metrics, publish):
        assert results_task.trigger_rule == "all_done", "results are never held hostage by a failure"
    teardown = dag.get_task("tear_down_environment")
    assert teardown.is_teardown
    assert not teardown.on_failure_fail_dagrun, "publish_results stays a leaf of the run's state"
    check = dag.get_task("check_teardown")
    assert (check.upstream_task_ids, check.trigger_rule) == ({"tear_down_environment"}, "all_done")
    assert (check.is_setup, check.is_teardown) == (False, False)
    # The run's state comes from its effective leaves: check_teardown, and publish_results, whose only
    # downstream is a teardown (Airflow's DagRun skips teardowns without on_failure_fail_dagrun).
    assert {task.task_id for task in dag.leaves} == {"check_teardown"}
    assert publish.downstream_task_ids == {"tear_down_environment"}
    assert set(teardown.upstream_task_ids) >= {t.task_id for t in setups} | {"publish_results"}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_runner_pod_of_each_scenario(dag: DAG, scenario: Any) -> None:
    task = dag.get_task(f"run_{scenario.name.replace('-', '_')}")
    assert isinstance(task, ScenarioPodOperator)
    # The repository is a deployment setting; a run picks only the tag or digest, pulled every time.
    assert task.image is not None
    assert task.image.startswith("ghcr.io/kai-scale-pipeline/runner{{ ")
    assert task.image.endswith("{{ params.runner_tag }}")
    assert task.image_pull_policy == "Always"
    assert task.log_pod_spec_on_failure is False
    assert task.cmds == ["kai-scale-runner"]
    assert task.arguments == ["run"]
    assert task.service_account_name == "kai-scale-runner"
    assert task.active_deadline_seconds == int(scenario.timeout.total_seconds())
    assert task.termination_message_policy == "FallbackToLogsOnError"
    assert task.durable is True
    env = task.env_vars  # a dict until rendered
    assert isinstance(env, dict)
    assert env["NODE_COUNT"] == "{{ params.node_count }}"
    assert type(scenario).model_validate_json(env["KAI_SCALE_SCENARIO"]) == scenario
    assert task.labels["kai-scale.dev/scenario"] == scenario.name
    assert task.container_resources is not None
    assert task.container_resources.requests == scenario.resources.requests


def _validated(dag: DAG, **values: Any) -> dict[str, Any]:
    params: ParamsDict = copy.deepcopy(dag.params)  # as a trigger does: conf over the DAG's Params
    for key, value in values.items():
        params[key] = value
    return dict(params.validate())


def test_defaults_are_valid_and_select_every_enabled_scenario(dag: DAG) -> None:
    values = _validated(dag)
    assert values["node_count"] == 500
    assert sorted(values["scenarios"]) == sorted(s.name for s in SCENARIOS if s.enabled)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("node_count", 0),
        ("node_count", 10_001),
        ("node_count", "many"),
        ("scenarios", []),
        ("scenarios", ["no-such-scenario"]),
        ("runner_tag", "bad tag"),
        ("runner_tag", "UPPER/case"),
    ],
)
def test_bad_params_are_refused_naming_the_field(dag: DAG, field: str, value: Any) -> None:
    with pytest.raises(ParamValidationError, match=field):
        _validated(dag, **{field: value})


@pytest.mark.parametrize(
    ("rest_of_file", "problem"),
    [
        ("timeout: ninety\n", "'timeout' Value error, must be a duration like 90m"),
        (
            'timeout: 90m\nmetrics: [{name: pod_binding_rate, query: up, unit: "1"}]\n',
            "metrics: query names must be unique, repeated: pod_binding_rate",
        ),
    ],
)
def test_a_bad_scenario_file_is_an_import_error_naming_file_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rest_of_file: str, problem: str
) -> None:
    """A malformed field, or a metric named like one of the profile's (it would crash collect_metrics)."""
    include = tmp_path / "include"
    shutil.copytree(REPO / "include", include, ignore=shutil.ignore_patterns("scenarios"))
    (include / "scenarios").mkdir(parents=True)
    header = "name: reclaim\ndescription: d\nrun: {kind: ginkgo, focus: Reclaim}\n"
    (include / "scenarios" / "reclaim.yaml").write_text(header + rest_of_file)
    monkeypatch.setenv("KAI_SCALE_INCLUDE_DIR", str(include))
    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert not bag.dags
    (error,) = bag.import_errors.values()
    assert f"scenario file {include}/scenarios/reclaim.yaml: {problem}" in error


@pytest.mark.parametrize(
    ("profile", "text", "problem"),
    [
        (
            "big",
            None,
            "KAI_SCALE_KAI_TUNING_PROFILE must name a tuning profile of {tuning}/ "
            "(local, local-unprofiled, scale), got 'big'",
        ),
        (
            "local",
            "extends: scale\npatches: [{kind: Config}]\n",
            "tuning profile {tuning}/local.yaml: 'patches.0.apiVersion' Field required",
        ),
    ],
)
def test_a_bad_tuning_profile_is_an_import_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, profile: str, text: str | None, problem: str
) -> None:
    """An unknown name (a deployment setting) or a broken profile file, before tune_kai would meet it."""
    include = tmp_path / "include"
    shutil.copytree(REPO / "include", include)
    tuning = include / "manifests" / "kai-tuning"
    if text is not None:
        (tuning / f"{profile}.yaml").write_text(text)
    monkeypatch.setenv("KAI_SCALE_INCLUDE_DIR", str(include))
    monkeypatch.setenv("KAI_SCALE_KAI_TUNING_PROFILE", profile)
    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert not bag.dags
    (error,) = bag.import_errors.values()
    assert problem.format(tuning=tuning) in error


def test_the_teardown_runs_whatever_became_of_the_setup(dag: DAG) -> None:
    """Airflow skips a teardown when no setup succeeded; this one must run after a refused preflight too."""
    assert dag.get_task("tear_down_environment").trigger_rule == "all_done"


def test_runner_placement_settings_reach_every_runner_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAI_SCALE_SYSTEM_NODE_SELECTOR", "kai-scale.dev/node-role=system")
    monkeypatch.setenv(
        "KAI_SCALE_SYSTEM_TOLERATIONS", "kai-scale.dev/node-role=system:NoSchedule,gpu:NoSchedule"
    )
    dag = DagBag(dag_folder=str(REPO / "dags")).dags["kai_scale_nightly"]
    runners = [task for task in dag.tasks if isinstance(task, ScenarioPodOperator)]
    assert runners
    for task in runners:
        # What the operator puts into the pod's spec (building the spec itself needs a cluster).
        assert task.node_selector == {"kai-scale.dev/node-role": "system"}
        assert [t.to_dict() for t in task.tolerations] == [
            {
                "key": "kai-scale.dev/node-role",
                "operator": "Equal",
                "value": "system",
                "effect": "NoSchedule",
                "toleration_seconds": None,
            },
            {
                "key": "gpu",
                "operator": "Exists",
                "value": None,
                "effect": "NoSchedule",
                "toleration_seconds": None,
            },
        ]


def test_without_alert_settings_the_dag_has_no_alerts(dag: DAG) -> None:
    assert not dag.on_failure_callback
    assert not dag.deadline
    assert all(not task.on_failure_callback for task in dag.tasks)


def test_alert_settings_attach_notifiers_deadlines_and_failure_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAI_SCALE_ALERT_EMAIL_TO", "ops@example.com")
    monkeypatch.setenv("KAI_SCALE_ALERT_WEBHOOK_CONN_ID", "alerts_webhook")
    monkeypatch.setenv("KAI_SCALE_RUN_ALERT_AFTER", "6h")
    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    dag = bag.dags["kai_scale_nightly"]
    notifiers = dag.on_failure_callback
    assert isinstance(notifiers, list)
    assert [type(n) for n in notifiers] == [RunAlertEmailNotifier, RunAlertWebhookNotifier]
    assert [getattr(n, "event", None) for n in notifiers] == ["failed", "failed"]
    for task in dag.tasks:
        assert task.on_failure_callback == [record_task_failure], task.task_id
    deadlines = DagSerialization.to_dict(dag)["dag"]["deadline"]
    assert [d["name"] for d in deadlines] == ["run-time limit (mail)", "run-time limit (webhook)"]
    (mail, hook) = [d["callback"]["__data__"] for d in deadlines]
    assert mail["path"] == "kai_scale.notifications.run_alerts.RunAlertEmailNotifier"
    assert mail["kwargs"]["to"] == ["ops@example.com"]
    assert mail["kwargs"]["event"] == hook["kwargs"]["event"] == "overdue"
    assert hook["kwargs"]["http_conn_id"] == "alerts_webhook"
    assert hook["kwargs"]["options"]["limit"] == "6h"
    assert {d["reference"]["reference_type"] for d in deadlines} == {"DagRunQueuedAtDeadline"}


def test_a_bad_alert_setting_is_an_import_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAI_SCALE_RUN_ALERT_AFTER", "6h")
    bag = DagBag(dag_folder=str(REPO / "dags"))
    (error,) = bag.import_errors.values()
    assert "KAI_SCALE_RUN_ALERT_AFTER is set ('6h') but no alert channel is" in error
