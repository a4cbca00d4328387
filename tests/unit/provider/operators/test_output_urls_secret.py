"""The Secret of a try's upload URLs: how the scenario task takes the API server's refusals.

A client that answers each call with a status stands in for the API server: a real one cannot be made
to refuse a Secret on demand.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.rest import ApiException
from structlog.testing import capture_logs

from kai_scale.hooks.cluster_errors import ApiError
from kai_scale.operators.scenario_pod import ScenarioPodOperator
from kai_scale.scenario_files import load_scenarios
from kai_scale.settings import PipelineSettings
from tests.conftest import REPO

HOST = "https://10.0.0.1:6443"
SECRET = "kai-scale-outputs-0123456789abcdef"


class _SecretsApi:
    """A ``CoreV1Api``'s Secret calls; each call in ``refusals`` is refused with its status."""

    def __init__(self, **refusals: int) -> None:
        self.refusals = refusals
        self.calls: list[str] = []
        self.api_client = SimpleNamespace(configuration=SimpleNamespace(host=HOST))

    def _answer(self, call: str) -> None:
        self.calls.append(call)
        if call in self.refusals:
            raise ApiException(status=self.refusals[call], reason="Refused")

    def create_namespaced_secret(self, namespace: str, body: Any) -> None:
        self._answer("create")

    def replace_namespaced_secret(self, name: str, namespace: str, body: Any) -> None:
        self._answer("replace")

    def delete_namespaced_secret(self, name: str, namespace: str) -> None:
        self._answer("delete")


def _operator(api: _SecretsApi, s3_connection: str) -> ScenarioPodOperator:
    scenario = load_scenarios(REPO / "include" / "scenarios")[0]
    settings = dataclasses.replace(
        PipelineSettings.from_environment(default_include_dir=REPO / "include"),
        aws_conn_id=s3_connection,
        results_bucket="unit-secrets",
    )
    operator = ScenarioPodOperator(scenario=scenario, settings=settings)
    # The pod operator's hook, as its cached property holds it: only its client is used here.
    operator.__dict__["hook"] = SimpleNamespace(core_v1_client=api)
    return operator


def _create(operator: ScenarioPodOperator) -> str:
    # Presigning only signs: the bucket need not exist.
    return operator._create_output_urls_secret(run_id="r1", try_number=1, keys={"outcome": "runs/r1/o.json"})


def test_a_rerun_of_the_same_try_renews_its_secret_in_place(s3_connection: str) -> None:
    api = _SecretsApi(create=409)
    _create(_operator(api, s3_connection))
    assert api.calls == ["create", "replace"]


def test_a_refused_secret_stops_the_task_naming_the_cluster_and_the_refusal(s3_connection: str) -> None:
    with pytest.raises(ApiError) as refused:
        _create(_operator(_SecretsApi(create=403), s3_connection))
    assert refused.value.status == 403
    assert str(refused.value).startswith(f"the cluster of connection 'kubernetes_default' at {HOST} refused")
    assert "to create Secret kai-scale-outputs-" in str(refused.value)


def test_a_secret_already_gone_is_no_warning_and_one_not_deleted_is(s3_connection: str) -> None:
    with capture_logs() as logs:
        _operator(_SecretsApi(delete=404), s3_connection)._delete_secret(SECRET)
    assert [log for log in logs if log["log_level"] == "warning"] == []
    with capture_logs() as logs:
        _operator(_SecretsApi(delete=403), s3_connection)._delete_secret(SECRET)
    (warning,) = [log for log in logs if log["log_level"] == "warning"]
    said = warning["event"]
    assert said.startswith(f"could not delete Secret {SECRET} (teardown removes it): the cluster of ")
    assert f"refused to delete Secret {SECRET}: 403 Refused" in said
