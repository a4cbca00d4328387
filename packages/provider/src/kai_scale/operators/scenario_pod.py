"""The operator that runs one scenario in its own runner pod."""

from __future__ import annotations

import hashlib
import json
from contextlib import AbstractContextManager, suppress
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
from airflow.sdk.log import mask_secret
from kubernetes.client import models as k8s

from kai_scale.cluster.gpus import free_gpus
from kai_scale.cluster.manifests import SetupError
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.hooks.cluster_errors import ClusterError, Conflict, NotFound, api_errors
from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.object_keys import scenario_outputs
from kai_scale.run_id import run_id_of
from kai_scale.settings import PipelineSettings
from kai_scale_model import labels
from kai_scale_model import runner_interface as interface
from kai_scale_model.durations import format_duration
from kai_scale_model.scenario import Scenario

if TYPE_CHECKING:
    from airflow.sdk import Context

RUNNER_SERVICE_ACCOUNT = "kai-scale-runner"
OUTPUTS_XCOM_KEY = "outputs"
# When the task ran its pod; the metrics window when the runner reported no times of its own.
WINDOW_XCOM_KEY = "window"
# The image the runner pod really ran: the reference and the digest the node resolved it to.
IMAGE_XCOM_KEY = "runner_image"
# Upload URLs outlive the pod's deadline by this much (the runner uploads after the suite ends).
URL_GRACE_SECONDS = 3600
OUTPUT_URLS_SECRET_KEY = "urls"
TERMINATED_PHASES = ("Succeeded", "Failed")


def scenario_task_id(scenario: str) -> str:
    """``run_<scenario>`` with underscores: the task id of a scenario."""
    return f"run_{scenario.replace('-', '_')}"


def output_urls_secret_name(*, run_id: str, scenario: str, try_number: int) -> str:
    """A DNS-1123 name for the Secret holding one try's upload URLs."""
    digest = hashlib.sha256(f"{run_id}/{scenario}/{try_number}".encode()).hexdigest()[:16]
    return f"kai-scale-outputs-{digest}"


def _pod_try(pod: k8s.V1Pod, default: int) -> int:
    return int((pod.metadata.labels or {}).get("try_number", default))


def _container_status(pod: k8s.V1Pod | None, container: str) -> k8s.V1ContainerStatus | None:
    statuses = (pod.status.container_statuses or []) if pod and pod.status else []
    return next((status for status in statuses if status.name == container), None)


def container_exit_code(pod: k8s.V1Pod | None, container: str) -> int | None:
    """The exit code of a pod's container once it has terminated; None before (or without a pod)."""
    status = _container_status(pod, container)
    terminated = status.state.terminated if status and status.state else None
    return int(terminated.exit_code) if terminated else None


def stopped_at_its_deadline(pod: k8s.V1Pod | None) -> bool:
    """Whether Kubernetes stopped the pod at its ``activeDeadlineSeconds`` (the scenario's timeout)."""
    return pod is not None and pod.status is not None and pod.status.reason == "DeadlineExceeded"


def scenario_task_error(
    *, scenario: str, exit_code: int | None, error: object, timed_out_after: timedelta | None = None
) -> str:
    """The scenario task's error: whether its scenario failed or did not run, then what the pod said.

    ``timed_out_after``: the scenario's timeout, when its pod was stopped at it; said first, since
    the pod's own last words are then only what it had printed so far.
    """
    if timed_out_after is not None:
        timeout = format_duration(timed_out_after)
        return f"scenario {scenario} failed: stopped at its timeout ({timeout}): {error}"
    ended = "did not run" if exit_code == interface.NOT_RUN_EXIT_CODE else "failed"
    return f"scenario {scenario} {ended}: {error}"


class ScenarioPodOperator(KubernetesPodOperator):
    """Run one scenario in a runner pod; the runner uploads its outputs to presigned URLs made here.

    The pod gets the scenario, ``NODE_COUNT`` and one upload URL per output and try, so it needs no S3
    credentials, and a retry writes beside (never over) the failed try's outputs. The URLs are signed
    credentials: they reach the pod through a Secret of their own (never the pod spec, which the
    provider logs), are masked in task logs, and the runner keeps them from the suite's environment.
    The keys of this try's outputs are pushed to XCom (key ``outputs``) before the pod starts; the
    time around the pod (key ``window``) and the image it ran (key ``runner_image``) when it ends,
    however it ends. The image is pulled on every start, so a moving tag tests what it points at now.

    Durable: when the worker dies, the task's retry reattaches to the runner pod (the provider keeps
    the pod's identity in the task state store) and records the outputs of the try that started it —
    also when the runner finished meanwhile: its outputs are adopted, not measured again. That retry is
    for a lost worker only: a scenario that fails or does not run (its runner exits 3: KAI missing or
    not ready), or whose pod cannot run, fails the task without retrying (clearing it runs the
    scenario again).

    :param scenario: the scenario to run.
    :param settings: deployment settings (connections, bucket, namespace, runner image repository).
    """

    def __init__(self, *, scenario: Scenario, settings: PipelineSettings, **kwargs: Any) -> None:
        resources = scenario.resources
        super().__init__(
            task_id=scenario_task_id(scenario.name),
            name=f"runner-{scenario.name}",
            namespace=settings.namespace,
            kubernetes_conn_id=settings.kubernetes_conn_id,
            image=settings.runner_image
            + "{{ '@' if params.runner_tag.startswith('sha256:') else ':' }}{{ params.runner_tag }}",
            image_pull_policy="Always",
            cmds=["kai-scale-runner"],
            arguments=["run"],
            env_vars={
                **scenario.env,
                interface.NODE_COUNT_ENV: "{{ params.node_count }}",
                interface.SCENARIO_ENV: scenario.model_dump_json(),
                "KAI_REF": "{{ params.kai_ref }}",
            },
            service_account_name=RUNNER_SERVICE_ACCOUNT,
            # A real cluster keeps the runner off the KWOK nodes (their taint) and, often, on its
            # system nodes: a deployment setting.
            node_selector=settings.system_node_selector,
            tolerations=[
                k8s.V1Toleration(**toleration.as_pod_spec()) for toleration in settings.system_tolerations
            ],
            container_resources=k8s.V1ResourceRequirements(
                requests=resources.requests, limits=resources.limits
            ),
            labels=labels.object_labels(run_id="pending", scenario=scenario.name, role=labels.RUNNER),
            active_deadline_seconds=int(scenario.timeout.total_seconds()),
            termination_message_policy="FallbackToLogsOnError",
            # A restarted worker reattaches to the runner pod instead of starting a second runner.
            durable=True,
            on_finish_action="delete_pod",
            get_logs=True,
            # The spec holds no secret any more, but it is long and says nothing the log does not.
            log_pod_spec_on_failure=False,
            startup_timeout_seconds=300,
            doc_md=f"**{scenario.name}** ({scenario.kind}): {scenario.description}",
            **kwargs,
        )
        self.scenario = scenario
        self.settings = settings
        self._try_number = 0
        self._adopting = False

    def execute(self, context: Context) -> Any:
        """Skip when not selected; otherwise make the upload URLs, record the keys and run the pod."""
        params = context["params"]
        if self.scenario.name not in params["scenarios"]:
            raise AirflowSkipException(f"scenario {self.scenario.name} is not selected for this run")
        run_id = run_id_of(context["dag_run"])
        self._try_number = try_number = context["ti"].try_number
        keys = scenario_outputs(run_id=run_id, scenario=self.scenario.name, try_number=try_number).by_name()
        if self._reattachable_pod(context) is None:
            # Not when a lost worker's runner is still there: its own scenario holds those GPUs.
            self._free_gpus()
        secret = self._create_output_urls_secret(run_id=run_id, try_number=try_number, keys=keys)
        self.labels = {**self.labels, labels.RUN_ID: labels.label_value(run_id)}
        context["ti"].xcom_push(key=OUTPUTS_XCOM_KEY, value={"try_number": try_number, "keys": keys})
        self.log.info("scenario %s, try %s: outputs go to %s", self.scenario.name, try_number, keys)
        started = datetime.now(UTC).isoformat()
        try:
            return super().execute(context)
        except Exception as error:
            exit_code = container_exit_code(self.remote_pod, self.base_container_name)
            timed_out = stopped_at_its_deadline(self.remote_pod)
            raise AirflowFailException(
                scenario_task_error(
                    scenario=self.scenario.name,
                    exit_code=exit_code,
                    error=error,
                    timed_out_after=self.scenario.timeout if timed_out else None,
                )
            ) from error
        finally:
            window = {"start": started, "end": datetime.now(UTC).isoformat()}
            context["ti"].xcom_push(key=WINDOW_XCOM_KEY, value=window)
            context["ti"].xcom_push(key=IMAGE_XCOM_KEY, value=self._image_ran())
            self._delete_secret(secret)

    def _reattachable_pod(self, context: Context) -> k8s.V1Pod | None:
        """A runner pod of an earlier try of this task, which the provider will reattach to."""
        return self.find_pod(self.namespace, context=context)

    def _free_gpus(self) -> None:
        try:
            with ClusterHook(conn_id=self.settings.kubernetes_conn_id) as cluster:
                lines = free_gpus(cluster, scenario=self.scenario.name)
        except SetupError as error:
            # Not "did not run", the status of a scenario whose KAI is missing: this is the pipeline's.
            raise AirflowFailException(f"scenario {self.scenario.name} could not start: {error}") from error
        for line in lines:
            self.log.info("%s", line)

    def _create_output_urls_secret(self, *, run_id: str, try_number: int, keys: dict[str, str]) -> str:
        bucket = ResultsBucketHook(aws_conn_id=self.settings.aws_conn_id, bucket=self.settings.results_bucket)
        expires = int(self.scenario.timeout.total_seconds()) + URL_GRACE_SECONDS
        urls = {name: bucket.presign_put(key=key, expires_seconds=expires) for name, key in keys.items()}
        for url in urls.values():
            mask_secret(url)
        name = output_urls_secret_name(run_id=run_id, scenario=self.scenario.name, try_number=try_number)
        body = k8s.V1Secret(
            metadata=k8s.V1ObjectMeta(
                name=name,
                namespace=self.namespace,
                labels=labels.object_labels(
                    run_id=run_id, scenario=self.scenario.name, role=labels.RUNNER_OUTPUTS
                ),
            ),
            string_data={OUTPUT_URLS_SECRET_KEY: json.dumps(urls)},
        )
        core = self.hook.core_v1_client
        try:
            with self._api(f"create Secret {name}"):
                core.create_namespaced_secret(self.namespace, body)
        except Conflict:  # a re-run of the same try: its URLs are renewed in place
            with self._api(f"replace Secret {name}"):
                core.replace_namespaced_secret(name, self.namespace, body)
        self.env_vars = [
            *self.env_vars,
            k8s.V1EnvVar(name=interface.RUN_ID_ENV, value=run_id),
            k8s.V1EnvVar(
                name=interface.OUTPUT_URLS_ENV,
                value_from=k8s.V1EnvVarSource(
                    secret_key_ref=k8s.V1SecretKeySelector(name=name, key=OUTPUT_URLS_SECRET_KEY)
                ),
            ),
            k8s.V1EnvVar(
                name=interface.NAMESPACE_ENV,
                value_from=k8s.V1EnvVarSource(
                    field_ref=k8s.V1ObjectFieldSelector(field_path="metadata.namespace")
                ),
            ),
        ]
        return name

    def _delete_secret(self, name: str) -> None:
        # The runner read it when its container started; teardown removes any left by a lost worker.
        try:
            # NotFound: gone already.
            with suppress(NotFound), self._api(f"delete Secret {name}"):
                self.hook.core_v1_client.delete_namespaced_secret(name, self.namespace)
        except ClusterError as error:
            self.log.warning("could not delete Secret %s (teardown removes it): %s", name, error)

    def _api(self, what: str) -> AbstractContextManager[None]:
        """Around a request on the pod's client: its errors raised as the pipeline's (``cluster_errors``)."""
        return api_errors(what, conn_id=str(self.kubernetes_conn_id), host=self._api_server)

    def _api_server(self) -> str:
        return str(self.hook.core_v1_client.api_client.configuration.host)

    def _image_ran(self) -> dict[str, str | None]:
        """The image reference and the digest the node pulled (None when the container never started)."""
        status = _container_status(self.remote_pod, self.base_container_name)
        return {"image": self.image, "image_id": (status.image_id or None) if status else None}

    def get_or_create_pod(self, pod_request_obj: k8s.V1Pod, context: Context) -> k8s.V1Pod:
        """The provider's pod lookup; a pod started by an earlier try keeps that try's outputs."""
        self._adopting = True
        try:
            pod = super().get_or_create_pod(pod_request_obj, context)
        finally:
            self._adopting = False
        ti = context["ti"]
        pod_try = _pod_try(pod, ti.try_number)
        if pod_try != ti.try_number:
            # Reattached after a lost worker: the runner uploads to the URLs its own try made.
            run_id = run_id_of(context["dag_run"])
            keys = scenario_outputs(run_id=run_id, scenario=self.scenario.name, try_number=pod_try).by_name()
            ti.xcom_push(key=OUTPUTS_XCOM_KEY, value={"try_number": pod_try, "keys": keys})
            self.log.info("reattached to the runner of try %s: its outputs go to %s", pod_try, keys)
        return pod

    def process_pod_deletion(self, pod: k8s.V1Pod, *, reraise: bool = True) -> bool:
        """Keep a runner that finished while its worker was lost: its outputs are adopted, not re-measured.

        The provider deletes a terminated pod it finds on reattach and starts another; a finished
        runner of an earlier try has uploaded its outputs, so the task takes them as they are.
        """
        phase = pod.status.phase if pod.status else None
        if (
            self._adopting
            and phase in TERMINATED_PHASES
            and _pod_try(pod, self._try_number) != self._try_number
        ):
            self.log.info(
                "the runner of try %s (%s) finished while its worker was lost: adopting its outputs",
                _pod_try(pod, self._try_number),
                pod.metadata.name,
            )
            return False
        return bool(super().process_pod_deletion(pod, reraise=reraise))


class XComReader(Protocol):
    """What the tasks after a scenario read its records with: a task instance's ``xcom_pull``."""

    def xcom_pull(self, *, task_ids: str, key: str) -> Any:
        """The value task ``task_ids`` pushed under ``key``; None when it pushed none."""


def recorded_outputs(ti: XComReader, scenario: str) -> dict[str, Any] | None:
    """What a scenario's task recorded: the try whose outputs count and their keys (None: never ran)."""
    outputs = ti.xcom_pull(task_ids=scenario_task_id(scenario), key=OUTPUTS_XCOM_KEY)
    return dict(outputs) if outputs else None


def recorded_window(ti: XComReader, scenario: str) -> dict[str, str] | None:
    """The time around a scenario's runner pod, as its task recorded it."""
    window = ti.xcom_pull(task_ids=scenario_task_id(scenario), key=WINDOW_XCOM_KEY)
    return dict(window) if window else None


def recorded_image(ti: XComReader, scenario: str) -> dict[str, str | None] | None:
    """The image a scenario's runner pod ran (reference and digest), as its task recorded it."""
    image = ti.xcom_pull(task_ids=scenario_task_id(scenario), key=IMAGE_XCOM_KEY)
    return dict(image) if image else None
