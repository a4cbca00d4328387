"""The operator that runs one scenario in its own runner pod."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
from kubernetes.client import models as k8s

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.object_keys import scenario_outputs
from kai_scale.run_id import run_id_of
from kai_scale.settings import PipelineSettings
from kai_scale_model import labels
from kai_scale_model import runner_interface as interface
from kai_scale_model.scenario import Scenario

RUNNER_SERVICE_ACCOUNT = "kai-scale-runner"
OUTPUTS_XCOM_KEY = "outputs"
# When the task ran its pod; the metrics window when the runner reported no times of its own.
WINDOW_XCOM_KEY = "window"
# Upload URLs outlive the pod's deadline by this much (the runner uploads after the suite ends).
URL_GRACE_SECONDS = 3600


def scenario_task_id(scenario: str) -> str:
    """``run_<scenario>`` with underscores: the task id of a scenario."""
    return f"run_{scenario.replace('-', '_')}"


class ScenarioPodOperator(KubernetesPodOperator):
    """Run one scenario in a runner pod; the runner uploads its outputs to presigned URLs made here.

    The pod gets the scenario, ``NODE_COUNT`` and one upload URL per output and try, so it needs no S3
    credentials, and a retry writes beside (never over) the failed try's outputs. The keys of this
    try's outputs are pushed to XCom (key ``outputs``) before the pod starts, and the time around the
    pod (key ``window``) when it ends, however it ends.

    Durable: when the worker dies, the task's retry reattaches to the running pod (the provider keeps
    the pod's identity in the task state store) and records the outputs of the try that started it.
    That retry is for a lost worker only: a scenario that fails, or whose pod cannot run, fails the
    task without retrying (clearing it runs the scenario again).

    :param scenario: the scenario to run.
    :param settings: deployment settings (connections, bucket, namespace).
    """

    def __init__(self, *, scenario: Scenario, settings: PipelineSettings, **kwargs: Any) -> None:
        resources = scenario.resources
        super().__init__(
            task_id=scenario_task_id(scenario.name),
            name=f"runner-{scenario.name}",
            namespace=settings.namespace,
            kubernetes_conn_id=settings.kubernetes_conn_id,
            image="{{ params.runner_image }}:{{ params.runner_tag }}",
            cmds=["kai-scale-runner"],
            arguments=["run"],
            env_vars={
                **scenario.env,
                interface.NODE_COUNT_ENV: "{{ params.node_count }}",
                interface.SCENARIO_ENV: scenario.model_dump_json(),
                "KAI_REF": "{{ params.kai_ref }}",
            },
            service_account_name=RUNNER_SERVICE_ACCOUNT,
            container_resources=k8s.V1ResourceRequirements(
                requests=resources.requests, limits=resources.limits
            ),
            labels=labels.object_labels(run_id="pending", scenario=scenario.name, role="runner"),
            active_deadline_seconds=int(scenario.timeout.total_seconds()),
            termination_message_policy="FallbackToLogsOnError",
            # A restarted worker reattaches to the running pod instead of starting a second runner.
            durable=True,
            on_finish_action="delete_pod",
            get_logs=True,
            startup_timeout_seconds=300,
            doc_md=f"**{scenario.name}** ({scenario.kind}): {scenario.description}",
            **kwargs,
        )
        self.scenario = scenario
        self.settings = settings

    def execute(self, context: Any) -> Any:
        """Skip when not selected; otherwise make the upload URLs, record the keys and run the pod."""
        params = context["params"]
        if self.scenario.name not in params["scenarios"]:
            raise AirflowSkipException(f"scenario {self.scenario.name} is not selected for this run")
        run_id = run_id_of(context["dag_run"])
        try_number = context["ti"].try_number
        keys = scenario_outputs(run_id=run_id, scenario=self.scenario.name, try_number=try_number).by_name()
        bucket = ResultsBucketHook(aws_conn_id=self.settings.aws_conn_id, bucket=self.settings.results_bucket)
        expires = int(self.scenario.timeout.total_seconds()) + URL_GRACE_SECONDS
        urls = {name: bucket.presign_put(key=key, expires_seconds=expires) for name, key in keys.items()}
        self.env_vars = [
            *self.env_vars,
            k8s.V1EnvVar(name=interface.RUN_ID_ENV, value=run_id),
            k8s.V1EnvVar(name=interface.OUTPUT_URLS_ENV, value=json.dumps(urls)),
            k8s.V1EnvVar(
                name=interface.NAMESPACE_ENV,
                value_from=k8s.V1EnvVarSource(
                    field_ref=k8s.V1ObjectFieldSelector(field_path="metadata.namespace")
                ),
            ),
        ]
        self.labels = {**self.labels, labels.RUN_ID: labels.label_value(run_id)}
        context["ti"].xcom_push(key=OUTPUTS_XCOM_KEY, value={"try_number": try_number, "keys": keys})
        self.log.info("scenario %s, try %s: outputs go to %s", self.scenario.name, try_number, keys)
        started = datetime.now(UTC).isoformat()
        try:
            return super().execute(context)
        except Exception as error:
            raise AirflowFailException(f"scenario {self.scenario.name}: {error}") from error
        finally:
            window = {"start": started, "end": datetime.now(UTC).isoformat()}
            context["ti"].xcom_push(key=WINDOW_XCOM_KEY, value=window)

    def get_or_create_pod(self, pod_request_obj: k8s.V1Pod, context: Any) -> k8s.V1Pod:
        """The provider's pod lookup; a pod started by an earlier try keeps that try's outputs."""
        pod = super().get_or_create_pod(pod_request_obj, context)
        ti = context["ti"]
        pod_try = int((pod.metadata.labels or {}).get("try_number", ti.try_number))
        if pod_try != ti.try_number:
            # Reattached after a lost worker: the runner uploads to the URLs its own try made.
            run_id = run_id_of(context["dag_run"])
            keys = scenario_outputs(run_id=run_id, scenario=self.scenario.name, try_number=pod_try).by_name()
            ti.xcom_push(key=OUTPUTS_XCOM_KEY, value={"try_number": pod_try, "keys": keys})
            self.log.info("reattached to the runner of try %s: its outputs go to %s", pod_try, keys)
        return pod


def recorded_outputs(ti: Any, scenario: str) -> dict[str, Any] | None:
    """What a scenario's task recorded: the try whose outputs count and their keys (None: never ran)."""
    outputs = ti.xcom_pull(task_ids=scenario_task_id(scenario), key=OUTPUTS_XCOM_KEY)
    return dict(outputs) if outputs else None


def recorded_window(ti: Any, scenario: str) -> dict[str, str] | None:
    """The time around a scenario's runner pod, as its task recorded it."""
    window = ti.xcom_pull(task_ids=scenario_task_id(scenario), key=WINDOW_XCOM_KEY)
    return dict(window) if window else None
