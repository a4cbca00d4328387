"""The nights the deployment's tests read: each triggered through the REST API as make demo does, with faults.

The first night runs KAI's real suite on the bare cluster; its workers, its scheduler and PostgreSQL are
lost while runners run. The second runs the shipped workload and the stand-in scenarios
(STANDIN_SCENARIOS: the runner's paths KAI's suite does not take) on the setup the first left, with
faults of the target cluster; one of them is cleared and re-run after the night, as an engineer does
from the UI. A third, short night cannot reach its cluster. A fourth names a runner tag nobody pushed,
and the cluster refuses its teardown until it is cleared. A fifth is slower than the history published
before it. Each is read once it ended (``Night``).
"""

from __future__ import annotations

import base64
import email.message
import json
import os
import random
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.operators.scenario_pod import scenario_task_id
from kai_scale.publishing.publisher import publish_run
from kai_scale.run_id import pipeline_run_id
from kai_scale.settings import DEFAULT_NAMESPACE, DEFAULT_RUNNER_IMAGE
from kai_scale_model import labels
from kai_scale_model.node_pool import NODEPOOL_CRD
from localenv import settings as localenv_settings
from localenv.airflow_api import AirflowApi
from localenv.airflow_values import CONNECTIONS, NAMESPACE
from localenv.demo import DAG_ID, follow, run_path, run_summary, task_instances, trigger
from localenv.environment import LocalEnvironment
from localenv.node_config import NODE_NAME
from tests.alert_receivers import SMTP_CONN_ID, WEBHOOK_CONN_ID, AlertReceivers
from tests.conftest import REPO
from tests.integration.airflow_deployment.cluster_state import infrastructure
from tests.integration.airflow_env import (
    STANDIN_IN_IMAGE,
    STANDIN_SUITE,
    logged_task_ids,
    published_run,
    read_json,
    standin_scenario,
    task_logs,
)
from tests.integration.cluster_faults import restart_api_server
from tests.integration.real_kai import switch_scheduler
from tests.waiting import wait_for

NODE_COUNT = 20
# The release's alert settings (conftest.release_settings): mail and webhook through the connections
# SMTP_CONN_ID and WEBHOOK_CONN_ID, to the package's receivers; an overdue alert once a night has run
# for RUN_ALERT_AFTER (the first two last longer).
RECIPIENTS = "kai-oncall@example.com"
RUN_ALERT_AFTER_SECONDS = 300
RUN_ALERT_AFTER = f"{RUN_ALERT_AFTER_SECONDS // 60}m"
RESULTS_URL = "https://results.example.com/Public/"
RESULTS_PREFIX = "Public/"  # the release's (KAI_SCALE_RESULTS_PREFIX unset)
ALERT_SETTINGS = {
    "KAI_SCALE_ALERT_EMAIL_TO": RECIPIENTS,
    "KAI_SCALE_ALERT_SMTP_CONN_ID": SMTP_CONN_ID,
    "KAI_SCALE_ALERT_WEBHOOK_CONN_ID": WEBHOOK_CONN_ID,
    "KAI_SCALE_RUN_ALERT_AFTER": RUN_ALERT_AFTER,
    "KAI_SCALE_RESULTS_URL": RESULTS_URL,
}
# The first night loses the worker of each: ADOPTED's while the scheduler is down, REATTACHED's not.
ADOPTED, REATTACHED = "sanity-fill-cluster", "whole-gpu-pending-background"
FIRST_NIGHT = (ADOPTED, REATTACHED)

# The second night's scenarios, deployed beside the shipped ones (the release's scenario files).
# One at a time in the order of their names: AWAITS_KAI is the first that needs KAI.
AWAITS_KAI = "standin-awaits-kai"
SLOW = "standin-slow"
STANDIN_SCENARIOS: dict[str, dict[str, Any]] = {
    AWAITS_KAI: standin_scenario("pass"),
    "standin-fail": standin_scenario("fail"),
    "standin-hangs": standin_scenario("hang", timeout="5s"),
    "standin-pass": standin_scenario("pass"),
    SLOW: standin_scenario("slow", STANDIN_SECONDS="60"),
    "standin-truncated": standin_scenario("truncate"),
}
SHIPPED_SCENARIOS = {path.stem: path.read_text() for path in (REPO / "include" / "scenarios").glob("*.yaml")}
ALL_SCENARIOS = set(SHIPPED_SCENARIOS) | set(STANDIN_SCENARIOS)
# The shipped workload (needs no KAI; the same runner image): run by the second night, named by the others.
WORKLOAD = "gpu-pod-throughput"
SECOND_NIGHT = (WORKLOAD, *STANDIN_SCENARIOS)
# The runner image's tag the second night names: the runner built from docker/runner/Dockerfile, plus
# the stand-in suite. Pushed again under the same tag before the clear (a tag moved between two tries).
STANDIN_TAG = "standin"

API_SERVER_DOWN_SECONDS = 20
S3_FROZEN_SECONDS = 60
# Where the second night's Prometheus connection points: a closed port of the worker pod itself.
UNREACHABLE_PROMETHEUS = {"conn_type": "prometheus", "host": "127.0.0.1", "port": 9, "schema": "http"}
# The third night's cluster connection: a kubeconfig of a server nobody runs (a closed port).
NOBODY_SERVES = "https://127.0.0.1:9"
UNREACHABLE_CLUSTER = {
    "conn_type": "kubernetes",
    "extra": {
        "in_cluster": False,
        "kube_config": {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "gone",
            "clusters": [
                {"name": "gone", "cluster": {"server": NOBODY_SERVES, "insecure-skip-tls-verify": True}}
            ],
            "users": [{"name": "gone", "user": {"token": "x"}}],
            "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "gone"}}],
        },
    },
}


def deployed_scenario_files() -> dict[str, str]:
    """The release's scenario files (``Overrides.scenarios``): the shipped ones and STANDIN_SCENARIOS."""
    standins = {
        f"{name}.yaml": yaml.safe_dump({"name": name, **body}) for name, body in STANDIN_SCENARIOS.items()
    }
    return {**{f"{name}.yaml": text for name, text in SHIPPED_SCENARIOS.items()}, **standins}


@dataclass(frozen=True)
class FirstPass:
    """The second night as it ended, before its AWAITS_KAI scenario was cleared and re-run.

    The clear re-runs the metrics, the publishing and the teardown, replacing what they left.
    """

    instances: dict[str, dict[str, Any]]
    """The run's task instances by task id."""
    published: dict[str, Any]
    """The run as published then (airflow_env.published_run)."""
    internal_metrics: dict[str, Any]
    """The operators' copy of the run's metrics.json, under runs/."""
    leftovers: dict[str, list[str]]
    """What its teardown left (``leftovers``)."""
    image_before: str
    """The digest STANDIN_TAG named during the night."""
    image_after: str
    """The digest it named for the cleared scenario's re-run."""


@dataclass(frozen=True)
class Night:
    """A run of the shipped DAG on the deployment, read once it ended."""

    run_id: str
    """Airflow's run id."""
    scenarios: tuple[str, ...]
    state: str
    instances: dict[str, dict[str, Any]]
    """The run's task instances by task id, as the REST API lists them."""
    summary: dict[str, Any]
    """The run summary publish_results pushed (empty when it pushed none)."""
    logs: dict[str, str]
    """Each task log's text (every try's) by its key in the bucket."""
    infrastructure: dict[str, str]
    """The cluster's infrastructure after the night (cluster_state.infrastructure)."""
    leftovers: dict[str, list[str]]
    """What the night's teardown should have removed and was still there after it (``leftovers``)."""
    lost_runners: dict[str, client.V1Pod] = field(default_factory=dict)
    """By scenario: the runner pod that ran while the scenario's worker was killed."""
    first_pass: FirstPass | None = None
    """A night re-run in part: how it ended the first time."""

    @property
    def pipeline_run_id(self) -> str:
        """The pipeline's run id, under which it published."""
        return str(self.summary["run_id"])

    def state_of(self, scenario: str) -> str:
        """The state of the scenario's task."""
        return str(self.instances[scenario_task_id(scenario)]["state"])

    def entry(self, scenario: str) -> dict[str, Any]:
        """The scenario's entry of the run summary."""
        return next(entry for entry in self.summary["scenarios"] if entry["scenario"] == scenario)

    def log_of(self, task_id: str) -> str:
        """The task's log (every try's), from the bucket."""
        return "\n".join(text for key, text in sorted(self.logs.items()) if f"/task_id={task_id}/" in key)


def read_night(
    api: AirflowApi, run_id: str, scenarios: tuple[str, ...], local_env: LocalEnvironment, **more: Any
) -> Night:
    """The run ``run_id``, ended, as its REST API, its task logs and the cluster show it.

    Waits for the log of each task that ran: a worker uploads it as its task ends, the last task's
    after the run ended.
    """
    summary = run_summary(api, run_id) or {}
    instances = {ti["task_id"]: ti for ti in task_instances(api, run_id)}
    ran = {task for task, ti in instances.items() if ti["hostname"]}

    def every_log() -> dict[str, str] | None:
        logs = task_logs(run_id)
        logged = logged_task_ids(logs)
        return logs if ran <= logged and logs else None

    return Night(
        run_id=run_id,
        scenarios=scenarios,
        state=str(api.get(run_path(run_id))["state"]),
        instances=instances,
        summary=summary,
        logs=wait_for(every_log, timeout=120, what=f"the logs of run {run_id}'s tasks in S3", interval=2),
        infrastructure=infrastructure(local_env),
        leftovers=leftovers(local_env, run_id=summary.get("run_id")),
        **more,
    )


def alerts_of(
    receivers: AlertReceivers, run_id: str, *, event: str, count: int = 1
) -> list[tuple[email.message.Message, dict[str, Any]]]:
    """The run's alerts of ``event`` (``failed``, ``overdue``): each mail with its webhook post.

    Waits until ``count`` arrived: the dag-processor sends a failed run's, the triggerer an overdue's.
    """

    def arrived() -> list[tuple[email.message.Message, dict[str, Any]]] | None:
        posts = [
            payload
            for _, _, payload in receivers.webhook.posts
            if payload["airflow_run_id"] == run_id and payload["event"] == event
        ]
        # Each alert goes by mail, then by webhook: the n-th post of a subject is its n-th mail's twin.
        mails: dict[str, list[email.message.Message]] = {}
        for _, message in receivers.mailbox.messages:
            mails.setdefault(str(message["Subject"]), []).append(message)
        paired = []
        for post in posts:
            twins = mails.get(post["subject"], [])
            if twins:
                paired.append((twins.pop(0), post))
        return paired if len(paired) >= count else None

    return wait_for(arrived, timeout=300, what=f"{count} {event} alert(s) of run {run_id}", interval=1)


# What a night's teardown leaves of what it added (``leftovers``): nothing.
NOTHING_LEFT: dict[str, list[str]] = {"nodepools": [], "kwok_nodes": [], "pods": [], "suite_namespaces": []}


def leftovers(local_env: LocalEnvironment, *, run_id: str | None) -> dict[str, list[str]]:
    """What a night adds and its teardown removes, by kind.

    Its pool, the KWOK nodes (every node but the real one), the pods of the pipeline's run ``run_id``
    (None: a run that never started one), the namespaces of KAI's suite.
    """
    nodes = local_env.kubectl("get", "nodes", "--output=name").split()
    pods = []
    if run_id is not None:
        selector = f"--selector={labels.RUN_ID}={labels.label_value(run_id)}"
        pods = local_env.kubectl("get", "pods", "--all-namespaces", selector, "--output=name").split()
    # A bare cluster has no pool: kwok-operator, and with it the NodePool type, comes with the first night.
    has_pools = local_env.kubectl("get", "crd", NODEPOOL_CRD, "--ignore-not-found", "--output=name").strip()
    return {
        "nodepools": local_env.kubectl("get", "nodepools", "--output=name").split() if has_pools else [],
        "kwok_nodes": [node for node in nodes if node != f"node/{NODE_NAME}"],
        "pods": pods,
        "suite_namespaces": local_env.kubectl(
            "get", "namespaces", "--selector=app=engine-e2e", "--output=name"
        ).split(),
    }


@contextmanager
def marked_failed_on_error(api: AirflowApi, run_id: str) -> Iterator[None]:
    """A test that fails while a run runs marks it failed: not left running into the next tests."""
    try:
        yield
    except BaseException:
        api.request("PATCH", run_path(run_id), json={"state": "failed"})
        raise


# The first night: the real suite, lost workers, a lost scheduler, PostgreSQL restarted.


def first_night(api: AirflowApi, core: client.CoreV1Api, local_env: LocalEnvironment) -> Night:
    """FIRST_NIGHT's scenarios at NODE_COUNT nodes; the workers of both lost while their runners run.

    ADOPTED: the scheduler and the worker are killed; a scheduler comes back once the runner finished
    and counts the killed one dead. REATTACHED: the worker is killed; PostgreSQL restarts while the
    retry waits.
    """
    run_id = trigger(api, {"node_count": NODE_COUNT, "scenarios": list(FIRST_NIGHT)})
    with marked_failed_on_error(api, run_id):
        adopted = runner_in(api, core, run_id, ADOPTED, "Running")
        worker = _running_worker(api, run_id, ADOPTED)
        (scheduler,) = airflow_pods(core, "scheduler")
        # Killed, so that its job is never ended; then held down (scaling down alone would stop it cleanly).
        _kill_processes(local_env, scheduler.metadata.name, container="scheduler")
        local_env.kubectl("scale", "deployment/airflow-scheduler", f"--namespace={NAMESPACE}", "--replicas=0")
        try:
            _kill_worker(local_env, core, worker)
            runner_in(api, core, run_id, ADOPTED, "Succeeded")
        finally:
            local_env.kubectl(
                "scale", "deployment/airflow-scheduler", f"--namespace={NAMESPACE}", "--replicas=1"
            )

        reattached = runner_in(api, core, run_id, REATTACHED, "Running")
        _kill_worker(local_env, core, _running_worker(api, run_id, REATTACHED))
        _running_worker(api, run_id, REATTACHED, try_number=2)
        database = local_env.postgres()
        database.stop()
        database.start()
        follow(api, run_id)
    lost = {ADOPTED: adopted, REATTACHED: reattached}
    return read_night(api, run_id, FIRST_NIGHT, local_env, lost_runners=lost)


def airflow_pods(core: client.CoreV1Api, component: str) -> list[client.V1Pod]:
    """The Airflow component's pods, less those of an earlier revision still shutting down."""
    pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"component={component}").items
    return [pod for pod in pods if pod.metadata.deletion_timestamp is None]


def _kill_worker(local_env: LocalEnvironment, core: client.CoreV1Api, pod: str) -> None:
    """SIGKILL to every process of a worker pod but its init, as when its node dies or it runs out of memory.

    Deleting the pod would not do: its task is told (SIGTERM) and stops its runner pod on the way out,
    as it must when a person marks the task failed.
    """
    _kill_processes(local_env, pod, container="base")

    def failed() -> bool:
        try:
            return str(core.read_namespaced_pod(pod, NAMESPACE).status.phase) == "Failed"
        except ApiException as error:  # the executor may delete the pod once it saw it fail
            return bool(error.status == 404)

    wait_for(failed, timeout=60, what=f"the killed worker pod {pod} to fail", interval=1)


def _kill_processes(local_env: LocalEnvironment, pod: str, *, container: str) -> None:
    """SIGKILL to every process of the container but its init (dumb-init, which then exits too)."""
    local_env.kubectl(
        "exec",
        f"--namespace={NAMESPACE}",
        pod,
        f"--container={container}",
        "--",
        "bash",
        "-c",
        "kill -9 -1",
        check=False,
    )


def runner_in(
    api: AirflowApi, core: client.CoreV1Api, run_id: str, scenario: str, phase: str
) -> client.V1Pod:
    """The runner pod of the scenario in the Airflow run ``run_id``, once it is in ``phase``.

    A runner that ended otherwise fails at once, and a failure tells what each runner pod was doing:
    its phase, its containers' states and its log's last lines.
    """
    # Runner pods carry the pipeline's run id, which is made of Airflow's and its run_after.
    run_after = datetime.fromisoformat(str(api.get(run_path(run_id))["run_after"]))  # Python 3.11 reads Z
    pipeline_run = pipeline_run_id(airflow_run_id=run_id, run_after=run_after)
    runner = labels.object_labels(run_id=pipeline_run, scenario=scenario, role=labels.RUNNER)
    selector = labels.selector(runner)
    what = f"{scenario}'s runner pod in phase {phase}"

    def found() -> client.V1Pod | None:
        pods = core.list_pod_for_all_namespaces(label_selector=selector).items
        ended = [pod for pod in pods if pod.status.phase in _ENDED_PHASES - {phase}]
        if ended:
            raise AssertionError(f"waiting for {what}, it ended instead:\n{_runner_pods_story(core, ended)}")
        return next((pod for pod in pods if pod.status.phase == phase), None)

    try:
        return wait_for(found, timeout=1500, what=what, interval=2)
    except AssertionError as error:
        pods = core.list_pod_for_all_namespaces(label_selector=selector).items
        raise AssertionError(f"{error}\n{_runner_pods_story(core, pods)}") from error


_ENDED_PHASES = frozenset({"Succeeded", "Failed"})


def _runner_pods_story(core: client.CoreV1Api, pods: list[client.V1Pod]) -> str:
    """Each pod's phase, reason, containers' states and last log lines: what a failed wait needs told."""
    if not pods:
        return "(no runner pod)"
    parts = []
    for pod in pods:
        name, namespace = pod.metadata.name, pod.metadata.namespace
        states = [
            f"{status.name}: {status.state.to_dict()}" for status in pod.status.container_statuses or []
        ]
        try:
            log = core.read_namespaced_pod_log(name, namespace, tail_lines=40)
        except ApiException as error:
            log = f"(its log could not be read: {error.status} {error.reason})"
        parts.append(
            f"pod {namespace}/{name}: phase {pod.status.phase}, reason {pod.status.reason},"
            f" message {pod.status.message}\n  " + "\n  ".join(states) + f"\n  last log lines:\n{log}"
        )
    return "\n".join(parts)


def _running_worker(api: AirflowApi, run_id: str, scenario: str, *, try_number: int = 1) -> str:
    """The worker pod running the scenario's task (its try ``try_number``): the task's hostname."""
    task = scenario_task_id(scenario)

    def running() -> str | None:
        ti = api.get(f"{run_path(run_id)}/taskInstances/{task}")
        ok = ti["state"] == "running" and ti["try_number"] == try_number and ti["hostname"]
        return str(ti["hostname"]) if ok else None

    return wait_for(running, timeout=600, what=f"{task}'s try {try_number} to run", interval=2)


# The second night: the stand-in scenarios with the target cluster's faults, one cleared after it.


def second_night(
    api: AirflowApi, core: client.CoreV1Api, local_env: LocalEnvironment, alerts: AlertReceivers
) -> Night:
    """SECOND_NIGHT at NODE_COUNT nodes, runner image STANDIN_TAG, with the target cluster's faults.

    - a GPU job an earlier night left in a namespace of KAI's suite (freed before the first scenario);
    - KAI's scheduler off from the setup's end until AWAITS_KAI did not run for it;
    - kube-apiserver killed and down for API_SERVER_DOWN_SECONDS while SLOW's runner runs (here also the
      API server of Airflow's own cluster: the executor, the workers and the UI's port-forward lose it);
    - a Prometheus the workers cannot reach (the connection changed in the Secret they read it from),
      until the run ended;
    - the S3 endpoint frozen for S3_FROZEN_SECONDS as publishing starts (its clients' requests hang).

    Once the run ended (read then: Night.first_pass) and its failure was alerted, STANDIN_TAG is pushed
    again (another image) and AWAITS_KAI is cleared through the REST API, as an engineer does after the
    alert: it re-runs, with the setup, metrics, publishing and teardown.
    """
    image_before = push_standin_runner(local_env)
    scenarios = SECOND_NIGHT
    with (
        _gpu_job_left_in_a_suite_namespace(core),
        connection_changed(core, "prometheus_default", UNREACHABLE_PROMETHEUS),
    ):
        triggered = time.time()
        run_id = trigger(
            api, {"node_count": NODE_COUNT, "runner_tag": STANDIN_TAG, "scenarios": list(scenarios)}
        )
        with marked_failed_on_error(api, run_id):
            _without_kai_until_it_did_not_run(api, core, local_env, run_id)
            _restart_the_api_server_while_slow_runs(api, core, local_env, run_id)
            _freeze_s3_as_publishing_starts(local_env, since=triggered)
            follow(api, run_id)
    summary = run_summary(api, run_id)
    assert summary is not None, f"run {run_id} published no summary"
    pipeline_run = str(summary["run_id"])
    instances = {ti["task_id"]: ti for ti in task_instances(api, run_id)}
    published, internal_metrics = published_run(pipeline_run), read_json(f"runs/{pipeline_run}/metrics.json")
    left = leftovers(local_env, run_id=pipeline_run)
    # The alert reads the run's records as the run ended: a clear would reset them.
    alerts_of(alerts, run_id, event="failed")
    # Prometheus is back (the operator fixed its connection) and the tag moved; then the clear.
    image_after = move_standin_tag(local_env)
    with marked_failed_on_error(api, run_id):
        _clear(api, run_id, AWAITS_KAI)
        follow(api, run_id)
    first_pass = FirstPass(
        instances=instances,
        published=published,
        internal_metrics=internal_metrics,
        leftovers=left,
        image_before=image_before,
        image_after=image_after,
    )
    return read_night(api, run_id, scenarios, local_env, first_pass=first_pass)


def push_standin_runner(local_env: LocalEnvironment) -> str:
    """Push the runner image with the stand-in suite as STANDIN_TAG; its digest."""
    registry = local_env.registry()
    reference = f"{DEFAULT_RUNNER_IMAGE}:{STANDIN_TAG}"
    registry.push_with_file(
        base=f"{DEFAULT_RUNNER_IMAGE}:main",
        reference=reference,
        file=STANDIN_SUITE,
        path_in_image=STANDIN_IN_IMAGE,
    )
    return f"{DEFAULT_RUNNER_IMAGE}@{registry.digest(reference)}"


def move_standin_tag(local_env: LocalEnvironment) -> str:
    """STANDIN_TAG pushed again, as another image (one more file, ``/moved``); its digest."""
    registry = local_env.registry()
    reference = f"{DEFAULT_RUNNER_IMAGE}:{STANDIN_TAG}"
    with tempfile.TemporaryDirectory() as scratch:
        moved = Path(scratch) / "moved"
        moved.write_text(f"moved {uuid.uuid4()}\n")
        registry.push_with_file(base=reference, reference=reference, file=moved, path_in_image="/moved")
    return f"{DEFAULT_RUNNER_IMAGE}@{registry.digest(reference)}"


def _without_kai_until_it_did_not_run(
    api: AirflowApi, core: client.CoreV1Api, local_env: LocalEnvironment, run_id: str
) -> None:
    """KAI's scheduler off once the setup tuned it; on again once AWAITS_KAI's task failed for it.

    tune_kai waits for KAI's rollout, so the switch comes after it. The DAG is paused while KAI
    switches (the scheduler then starts no task of the run): off, before the first scenario; on,
    before the scenario after AWAITS_KAI.
    """
    wait_for(
        lambda: api.get(f"{run_path(run_id)}/taskInstances/setup.tune_kai")["state"] == "success",
        timeout=1500,
        what="the setup to tune KAI",
        interval=1,
    )
    with _paused(api):
        switch_scheduler(local_env, core, enabled=False)
    try:
        runner_in(api, core, run_id, AWAITS_KAI, "Running")
        with _paused(api):
            wait_for(
                lambda: (
                    api.get(f"{run_path(run_id)}/taskInstances/{scenario_task_id(AWAITS_KAI)}")["state"]
                    == "failed"
                ),
                timeout=600,
                what=f"{AWAITS_KAI} to fail: it does not run without KAI's scheduler",
                interval=2,
            )
    finally:
        with _paused(api):
            switch_scheduler(local_env, core, enabled=True)


@contextmanager
def _paused(api: AirflowApi) -> Iterator[None]:
    _pause(api, paused=True)
    try:
        yield
    finally:
        _pause(api, paused=False)


def _pause(api: AirflowApi, *, paused: bool) -> None:
    answer = api.request("PATCH", f"/dags/{DAG_ID}", json={"is_paused": paused})
    assert answer.status_code == 200, answer.text[:300]


def _restart_the_api_server_while_slow_runs(
    api: AirflowApi, core: client.CoreV1Api, local_env: LocalEnvironment, run_id: str
) -> None:
    """Once SLOW's runner runs (60 s), kube-apiserver is killed and started again 20 s later."""

    def runner_running_or_run_over() -> bool:
        pods = core.list_namespaced_pod(DEFAULT_NAMESPACE, label_selector=f"{labels.SCENARIO}={SLOW}").items
        running = any(pod.status.phase == "Running" for pod in pods)
        return running or api.get(run_path(run_id))["state"] in ("success", "failed")

    wait_for(runner_running_or_run_over, timeout=1200, what=f"{SLOW}'s runner to run", interval=0.5)
    time.sleep(5)  # well inside the scenario
    restart_api_server(local_env, down_seconds=API_SERVER_DOWN_SECONDS)


def _freeze_s3_as_publishing_starts(local_env: LocalEnvironment, *, since: float) -> None:
    """Once collect_metrics wrote profiles.json, its last object (after ``since``), S3 is frozen (SIGSTOP).

    Frozen rather than killed: its data lives in its memory. For S3_FROZEN_SECONDS every request to
    it hangs: publishing's, and Airflow's remote logging's.
    """
    s3 = local_env.s3().client()

    def collected() -> bool:
        pages = s3.get_paginator("list_objects_v2").paginate(
            Bucket=localenv_settings.DEFAULT_BUCKET, Prefix="runs/"
        )
        return any(
            item["Key"].endswith("/profiles.json") and item["LastModified"].timestamp() > since
            for page in pages
            for item in page.get("Contents", [])
        )

    wait_for(collected, timeout=1200, what="collect_metrics to write profiles.json", interval=0.2)
    s3_server = int((local_env.config.run_dir / "s3.pid").read_text().split()[0])  # "<pid> <start time>"
    os.kill(s3_server, signal.SIGSTOP)
    try:
        time.sleep(S3_FROZEN_SECONDS)
    finally:
        os.kill(s3_server, signal.SIGCONT)


def _clear(api: AirflowApi, run_id: str, scenario: str) -> None:
    """Clear the scenario's task and what follows it, as an engineer does from the UI; the run restarts."""
    task = scenario_task_id(scenario)
    cleared = clear_task(api, run_id, task)
    assert {task, "collect_metrics", "publish_results", "tear_down_environment"} <= cleared
    assert not {scenario_task_id(name) for name in ALL_SCENARIOS - {scenario}} & cleared, "only it"


def clear_task(api: AirflowApi, run_id: str, task: str) -> set[str]:
    """Clear the task and its downstream through the REST API, as the UI does; the tasks cleared.

    Waits for the run to restart.
    """
    cleared = api.request(
        "POST",
        f"/dags/{DAG_ID}/clearTaskInstances",
        json={
            "dag_run_id": run_id,
            "task_ids": [task],
            "include_downstream": True,
            "only_failed": False,
            "reset_dag_runs": True,
            "dry_run": False,
        },
    )
    assert cleared.status_code == 200, cleared.text
    wait_for(lambda: api.get(run_path(run_id))["state"] != "failed", timeout=60, what="the run to restart")
    return {ti["task_id"] for ti in cleared.json()["task_instances"]}


@contextmanager
def connection_changed(core: client.CoreV1Api, conn_id: str, body: Mapping[str, Any]) -> Iterator[None]:
    """The connection changed in kai-scale-connections (each new worker pod reads it); then put back."""
    secret = core.read_namespaced_secret(CONNECTIONS, NAMESPACE)
    before = secret.data[conn_id]
    changed = base64.b64encode(json.dumps(body).encode()).decode()
    core.patch_namespaced_secret(CONNECTIONS, NAMESPACE, {"data": {conn_id: changed}})
    try:
        yield
    finally:
        core.patch_namespaced_secret(CONNECTIONS, NAMESPACE, {"data": {conn_id: before}})


@contextmanager
def _gpu_job_left_in_a_suite_namespace(core: client.CoreV1Api) -> Iterator[str]:
    """A namespace of KAI's suite with a pod holding one GPU, as a failed spec of an earlier night leaves.

    The pod is bound to a Node object of its own that no kubelet serves (the night's KWOK nodes do not
    exist yet), and tolerates that node being unreachable: neither the pod garbage collector (which
    removes pods of nodes that do not exist) nor the node controller's eviction removes it before the
    night's first scenario does.
    """
    node = f"held-gpus-{uuid.uuid4().hex[:6]}"
    namespace = f"kai-e2e-{uuid.uuid4().hex[:6]}"
    forever = [
        {"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute"}
        for taint in ("unreachable", "not-ready")
    ]
    try:
        core.create_node({"metadata": {"name": node}})
        core.create_namespace({"metadata": {"name": namespace, "labels": {"app": "engine-e2e"}}})
        core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"name": "leftover-job"},
                "spec": {
                    "nodeName": node,
                    "tolerations": forever,
                    "containers": [
                        {"name": "main", "image": "pause", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                    ],
                },
            },
        )
        yield namespace
    finally:
        _delete_if_there(lambda: core.delete_namespace(namespace))  # the night deletes it, as it should
        _delete_if_there(lambda: core.delete_node(node))


def _delete_if_there(delete: Callable[[], object]) -> None:
    """Run ``delete``; what is gone already (404) is no error."""
    try:
        delete()
    except ApiException as error:
        if error.status != 404:
            raise


# The third night: its cluster connection points at a closed port.


def night_without_its_cluster(api: AirflowApi, core: client.CoreV1Api, local_env: LocalEnvironment) -> Night:
    """One scenario, the cluster connection changed to UNREACHABLE_CLUSTER for the night."""
    scenarios = (WORKLOAD,)
    with connection_changed(core, "kubernetes_default", UNREACHABLE_CLUSTER):
        run_id = trigger(api, {"node_count": NODE_COUNT, "scenarios": list(scenarios)})
        with marked_failed_on_error(api, run_id):
            follow(api, run_id)
    return read_night(api, run_id, scenarios, local_env)


# The fourth night: a runner tag the registry does not have, and a teardown the cluster refuses.

MISSING_TAG = "never-pushed"
# A cluster policy that forbids deleting NodePools: the teardown of a night that created its pool fails.
NO_NODEPOOL_DELETION = "kai-scale-test-no-nodepool-deletion"
NODEPOOL_DELETION_POLICY: list[dict[str, Any]] = [
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": NO_NODEPOOL_DELETION},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["kwok.sigs.run-ai.com"],
                        "apiVersions": ["*"],
                        "operations": ["DELETE"],
                        "resources": ["nodepools"],
                    }
                ]
            },
            "validations": [
                {"expression": "false", "message": "NodePools are not deleted here (test policy)"}
            ],
        },
    },
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": NO_NODEPOOL_DELETION},
        "spec": {"policyName": NO_NODEPOOL_DELETION, "validationActions": ["Deny"]},
    },
]


@dataclass(frozen=True)
class RefusedTeardown:
    """The fourth night as it ended, before its teardown was cleared."""

    instances: dict[str, dict[str, Any]]
    """The run's task instances by task id."""
    leftovers: dict[str, list[str]]
    """What the refused teardown left (``leftovers``)."""
    cleared: set[str]
    """The tasks the clear of the teardown cleared."""
    pending_at_clear: list[datetime]
    """When the run's overdue alerts (one per channel) were due, as the clear started."""
    due_after_clear: list[datetime]
    """When they are due once the clear queued the run again, and that time (the run's ``queued_at``)."""
    queued_again_at: datetime


def night_with_a_missing_runner_image(
    api: AirflowApi, local_env: LocalEnvironment, alerts: AlertReceivers
) -> tuple[Night, RefusedTeardown]:
    """WORKLOAD on a pool of its own, runner tag MISSING_TAG; NO_NODEPOOL_DELETION refuses its teardown.

    Once it ended, the policy is deleted and the teardown cleared through the REST API, as an engineer
    does once the cluster's admins lifted it: the teardown re-runs and removes what the night added.
    """
    scenarios = (WORKLOAD,)
    assert leftovers(local_env, run_id=None)["nodepools"] == [], "the night creates its pool, so deletes it"
    policy = json.dumps({"kind": "List", "apiVersion": "v1", "items": NODEPOOL_DELETION_POLICY})
    local_env.kubectl("apply", "-f", "-", input_text=policy)
    try:
        run_id = trigger(
            api, {"node_count": NODE_COUNT, "runner_tag": MISSING_TAG, "scenarios": list(scenarios)}
        )
        with marked_failed_on_error(api, run_id):
            follow(api, run_id)
    finally:
        local_env.kubectl("delete", "--ignore-not-found", "-f", "-", input_text=policy)
    instances = {ti["task_id"]: ti for ti in task_instances(api, run_id)}
    summary = run_summary(api, run_id)
    left = leftovers(local_env, run_id=summary["run_id"] if summary else None)
    alerts_of(alerts, run_id, event="failed")  # read before the clear resets the run's records
    if left["nodepools"]:
        _wait_until_nodepools_may_be_deleted(local_env)
    pending = pending_deadlines(api, run_id)
    with marked_failed_on_error(api, run_id):
        cleared = clear_task(api, run_id, "tear_down_environment")
        due_after, queued_again = pending_deadlines(api, run_id), api.get(run_path(run_id))["queued_at"]
        follow(api, run_id)
    refused = RefusedTeardown(
        instances=instances,
        leftovers=left,
        cleared=cleared,
        pending_at_clear=pending,
        due_after_clear=due_after,
        queued_again_at=datetime.fromisoformat(queued_again),
    )
    return read_night(api, run_id, scenarios, local_env), refused


def pending_deadlines(api: AirflowApi, run_id: str) -> list[datetime]:
    """When the run's overdue alerts not yet sent are due, as Airflow's UI reads them (its own API)."""
    answer = httpx.get(
        f"{api.base_url}/ui{run_path(run_id)}/deadlines",
        headers={"Authorization": f"Bearer {api.token}"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    deadlines = answer.json()["deadlines"]
    return sorted(datetime.fromisoformat(d["deadline_time"]) for d in deadlines if not d["missed"])


def _wait_until_nodepools_may_be_deleted(local_env: LocalEnvironment) -> None:
    """The API server drops a deleted policy a moment later: until then a delete is still refused."""

    def allowed() -> bool:  # a refused delete writes nothing on stdout; an allowed one names the pool
        would_delete = local_env.kubectl(
            "delete", "nodepools", "--all", "--dry-run=server", "--output=name", check=False
        )
        return bool(would_delete.strip())

    wait_for(allowed, timeout=60, what=f"the API server to drop {NO_NODEPOOL_DELETION}", interval=1)


# The fifth night: slower than the history published before it.

# A size no other night runs: the night's history is the one seeded for it alone.
SLOWER_NODE_COUNT = 21
SLOWER = "standin-pass"
# Nights of the stand-in suite's Fill Cluster test at SLOWER_NODE_COUNT: thirty near 300 s, then two at
# the new level (SEEDED_NEW_LEVEL); the stand-in reports 396.7 s, so the night completes a +32 % change
# that started two runs before it.
SEEDED_RUN_IDS = tuple(f"2026{night:04d}-scheduled" for night in range(32))
SEEDED_NEW_LEVEL = (395.0, 398.0)


def night_slower_than_its_history(api: AirflowApi, local_env: LocalEnvironment) -> Night:
    """SLOWER at SLOWER_NODE_COUNT nodes on the runner tag STANDIN_TAG, after its history is published."""
    noise = random.Random(11)
    _publish_history([300 * (1 + noise.uniform(-0.05, 0.05)) for _ in range(30)] + list(SEEDED_NEW_LEVEL))
    push_standin_runner(local_env)
    scenarios = (SLOWER,)
    conf = {"node_count": SLOWER_NODE_COUNT, "runner_tag": STANDIN_TAG, "scenarios": list(scenarios)}
    run_id = trigger(api, conf)
    with marked_failed_on_error(api, run_id):
        follow(api, run_id)
    return read_night(api, run_id, scenarios, local_env)


def _publish_history(seconds: list[float]) -> None:
    """SEEDED_RUN_IDS, published under the release's prefix as publish_results publishes a night."""
    store = ResultsBucketHook(aws_conn_id="aws_default", bucket=localenv_settings.DEFAULT_BUCKET)
    for night, (run_id, value) in enumerate(zip(SEEDED_RUN_IDS, seconds, strict=True)):
        tests = [
            {
                "test_name": "Fill Cluster with single GPU Jobs",
                "status": "success",
                "details": {
                    "nodes": SLOWER_NODE_COUNT,
                    "jobs": 8 * SLOWER_NODE_COUNT,
                    "time": f"{value:.1f}s",
                },
            }
        ]
        publish_run(
            store,
            prefix=RESULTS_PREFIX,
            run_id=run_id,
            results={"metadata": {}, "results": {"status": "success", "tests": tests}},
            metrics_text=json.dumps({"run_id": run_id, "scenarios": {}}),
            verdicts={"run_id": run_id, "verdict": "pass", "reasons": [], "tests": {}},
            ginkgo_report_keys={},
            entry={
                "timestamp": f"2026-09-{1 + night // 24:02d}T{night % 24:02d}:00:00Z",
                "path": f"{RESULTS_PREFIX}{run_id}/results.json",
                "commit": "abc",
                "run_id": run_id,
                "node_count": SLOWER_NODE_COUNT,
                "status": "success",
            },
        )
