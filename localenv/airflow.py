"""Airflow as its users run it: the official Helm chart in the local cluster, on the local PostgreSQL.

The release installs the chart the local registry serves (``localenv.charts.AIRFLOW_CHART``) with
deploy/airflow/values.yaml, the local overlay deploy/airflow/values-local.yaml, and a third values
file of what depends on this machine (localenv.airflow_values). Before it, the Secrets values.yaml
names are created as a deployer creates them (the same module; the keys, once, here). A deploy that
cannot start a container stops naming it and its last log lines. The UI is served on loopback by
``kubectl port-forward``; localenv.airflow_api is its REST client.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import shlex
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from kai_scale_model.waiting import Deadline, wait_for
from localenv import airflow_values, processes
from localenv.airflow_api import AirflowApi
from localenv.airflow_values import LOCAL_VALUES, NAMESPACE, VALUES, Overrides
from localenv.charts import AIRFLOW_CHART
from localenv.environment import LocalEnvironment
from localenv.paths import REPO
from localenv.processes import ComponentError

RELEASE = "airflow"
# What the chart runs, by kind/name, each awaited after an install or upgrade.
WORKLOADS = (
    "deployment/airflow-api-server",
    "deployment/airflow-scheduler",
    "deployment/airflow-dag-processor",
    "deployment/airflow-triggerer",
    "deployment/airflow-statsd",
)
API_SERVER_SERVICE = "service/airflow-api-server"
API_SERVER_PORT = 8080
# The UI's port-forward on loopback, one process per port: airflow-ui-<port>.
UI_COMPONENT = "airflow-ui"
# Where the task logs go (values.yaml's remote_base_log_folder), for the tests' reading.
TASK_LOGS_PREFIX = "airflow-logs/"
ROLLOUT_TIMEOUT_SECONDS = 600
# How helm begins its refusal of values that the chart's values.schema.json does not allow.
SCHEMA_REFUSAL = "values don't meet the specifications of the schema"
HELM_TIMEOUT = "15m"
# How often a deploy looks at the release's pods: a container that cannot start since the deploy began
# stops it there (a database it cannot reach, a setting it refuses) instead of after HELM_TIMEOUT; Airflow's
# services fail within seconds of losing their database, its migration job only after minutes.
POLL_SECONDS = 10
# A container that failed once and came back is not a failed deploy: the api-server and the chart's
# create-user job (a post-upgrade hook) start together and both sync Flask-AppBuilder's permissions;
# the loser exits with a UniqueViolation, then starts. Failing again after its restart is a container
# that cannot start.
FAILURES_OF_A_CONTAINER_THAT_CANNOT_START = 2
# The label KubernetesExecutor gives its worker pods, in the release's namespace beside its services.
WORKER_POD_LABEL = "kubernetes_executor"


class AirflowDeployment:
    """The Airflow release of one local environment."""

    def __init__(
        self, environment: LocalEnvironment, values: tuple[Path, ...] = (VALUES, LOCAL_VALUES)
    ) -> None:
        self.environment = environment
        self.config = environment.config
        self.values = values
        """The values files, in helm's order: the one a user starts from, then the local overlay."""
        self.overrides = Overrides()
        """What the last ``deploy`` gave the release over the local overlay."""

    # ---- install ---------------------------------------------------------------------------------
    def deploy(self, overrides: Overrides | None = None) -> bool:
        """Install or upgrade the release when its inputs changed, then wait until it runs.

        Returns whether helm ran (False: the running release already had these inputs).
        """
        self.overrides = overrides or Overrides()
        image = self.environment.built_images().airflow_image
        generated = airflow_values.write_machine_values(self.environment, image, self.overrides)
        values = (*self.values, generated)
        secrets_manifest = airflow_values.secrets_manifest(self.environment, self.overrides)
        inputs = [path.read_bytes() for path in values] + [
            secrets_manifest.encode(),
            AIRFLOW_CHART.version.encode(),
        ]
        digest = hashlib.sha256(b"".join(inputs)).hexdigest()
        record = self.config.home / "airflow-release.sha256"
        if record.exists() and record.read_text() == digest and self._release_deployed():
            self.wait_ready()
            return False
        self.environment.kubectl("apply", "-f", "-", input_text=secrets_manifest)
        self._create_keys_once()
        started = datetime.now(UTC)
        self._helm_upgrade(values, started)
        self.wait_ready(since=started)
        record.write_text(digest)
        return True

    def _create_keys_once(self) -> None:
        """The keys of ``airflow-keys``, made once: they must stay the same across upgrades."""
        keys = ("-n", NAMESPACE, "get", "secret", "airflow-keys", "--ignore-not-found", "--output=name")
        if self.environment.kubectl(*keys, check=False).strip():
            return
        secret = airflow_values.secret(
            "airflow-keys",
            {
                "fernet-key": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
                "api-secret-key": secrets.token_urlsafe(32),
                "jwt-secret": secrets.token_urlsafe(32),
            },
        )
        self.environment.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(secret))

    def _helm_upgrade(self, values: tuple[Path, ...], started: datetime) -> None:
        registry = self.environment.registry().address
        log_path = self.config.logs_dir / "airflow-helm.log"
        argv = [
            str(self.config.helm_dir / "helm"),
            "upgrade",
            "--install",
            RELEASE,
            f"oci://{registry}/{AIRFLOW_CHART.reference}",
            "--version",
            AIRFLOW_CHART.version,
            "--plain-http",
            f"--namespace={NAMESPACE}",
            f"--kubeconfig={self.config.kubeconfig}",
            f"--timeout={HELM_TIMEOUT}",
            *(f"--values={path}" for path in values),
        ]
        chart = f"chart {AIRFLOW_CHART.version}"
        print(f"airflow: helm upgrade --install {RELEASE} ({chart}; log: {log_path})", flush=True)
        errors_path = self.config.logs_dir / "airflow-helm.stderr"
        with log_path.open("a") as log, errors_path.open("w+") as errors:
            log.write(f"$ {' '.join(argv)}\n")
            log.flush()
            helm = subprocess.Popen(argv, stdout=log, stderr=errors, text=True)
            failing = self._wait_for_helm(helm, started)
            errors.seek(0)
            stderr = errors.read()
            log.write(stderr)
        if failing is not None:
            raise ComponentError(
                f"airflow: {failing} failed during helm's install or upgrade; helm was stopped, the release "
                f"is marked failed ({log_path}){self._failure_log(failing)}"
            )
        if helm.returncode != 0:
            said = stderr.strip().splitlines()
            if any(SCHEMA_REFUSAL in line for line in said):
                # helm checks the values against the chart's schema before it changes anything.
                files = ", ".join(_shown(path) for path in values)
                refusals = "; ".join(line.removeprefix("- ") for line in said if line.startswith("- "))
                raise ComponentError(
                    f"airflow: the chart {AIRFLOW_CHART.version} refuses the values of {files}: "
                    f"{refusals or said[-1]} (release unchanged; {log_path})"
                )
            raise ComponentError(
                f"airflow: helm upgrade of the chart failed: {said[-1] if said else 'no message'} "
                f"({log_path}){self._diagnosis()}"
            )

    def _wait_for_helm(self, helm: subprocess.Popen[str], started: datetime) -> str | None:
        """Until helm ends; or, once a container of the release failed, stop it: ``<pod>/<container>``.

        helm would wait ``HELM_TIMEOUT`` for a migration job that cannot reach its database; stopped
        (SIGTERM), it marks the release failed, and the next upgrade starts from there.
        """
        while True:
            try:
                helm.wait(timeout=POLL_SECONDS)
                return None
            except subprocess.TimeoutExpired:
                failing = self._failed_container(since=started)
                if failing is not None:
                    helm.terminate()
                    try:
                        helm.wait(timeout=120)
                    except subprocess.TimeoutExpired:
                        helm.kill()  # the release then stays pending-upgrade: helm rollback clears it
                        helm.wait()
                    return failing

    def _failed_container(self, *, since: datetime) -> str | None:
        """A container of the release that cannot start since ``since`` (``<pod>/<container>``)."""
        # a listing that fails once (a busy API server) is retried next poll
        return container_that_cannot_start(self._pods(), since=since)

    def _failure_log(self, failed: str) -> str:
        """The last log lines of a failed container (``<pod>/<container>``): those before it was restarted."""
        pod, _, container = failed.partition("/")
        logs = ("-n", NAMESPACE, "logs", pod, f"--container={container}", "--previous", "--tail=15")
        tail = [line for line in self.environment.kubectl(*logs, check=False).splitlines() if line.strip()]
        indented = "\n".join(f"    {line}" for line in tail or ["(none)"])
        return f"\n  its last log lines before it failed:\n{indented}"

    def _pods(self) -> list[dict[str, Any]]:
        """The release namespace's pods, as kubectl lists them; none when it cannot."""
        listing = self.environment.kubectl("-n", NAMESPACE, "get", "pods", "--output=json", check=False)
        try:
            return list(json.loads(listing)["items"])
        except (json.JSONDecodeError, KeyError):
            return []

    def _release_deployed(self) -> bool:
        result = self._helm("status", "--output=json")
        return result.returncode == 0 and json.loads(result.stdout)["info"]["status"] == "deployed"

    def _helm(self, command: str, *args: str) -> subprocess.CompletedProcess[str]:
        """Helm ``command`` on this release, its namespace and the cluster's kubeconfig."""
        argv = [str(self.config.helm_dir / "helm"), command, RELEASE, f"--namespace={NAMESPACE}"]
        argv += [f"--kubeconfig={self.config.kubeconfig}", *args]
        return subprocess.run(argv, capture_output=True, text=True, check=False)

    def wait_ready(self, *, since: datetime | None = None) -> None:
        """Until every workload of the release is rolled out and no pod it replaced runs any more.

        Raises naming the pod and its log as soon as a container of the release failed after
        ``since`` (by default, this call). Once it returns, what the services record in the database
        is the new release's: a replaced dag-processor parses the DAG file until it is gone.
        """
        since = since or datetime.now(UTC)
        deadline = Deadline(seconds=ROLLOUT_TIMEOUT_SECONDS)
        # Not wait_for: `kubectl rollout status` waits each poll out itself, and a workload rolled out
        # hands what is left of the deadline to the next.
        waiting = list(WORKLOADS)
        while waiting:
            rollout = subprocess.run(
                [
                    str(self.config.bin_dir / "kubectl"),
                    f"--kubeconfig={self.config.kubeconfig}",
                    f"--namespace={NAMESPACE}",
                    "rollout",
                    "status",
                    waiting[0],
                    f"--timeout={POLL_SECONDS}s",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if rollout.returncode == 0:
                waiting.pop(0)
                continue
            failing = self._failed_container(since=since)
            if failing is not None:
                raise ComponentError(
                    f"airflow: {failing} failed while the release rolled out{self._failure_log(failing)}"
                )
            if deadline.passed():
                raise ComponentError(
                    f"airflow: {waiting[0]} is not ready after {ROLLOUT_TIMEOUT_SECONDS} s: "
                    f"{rollout.stderr.strip() or rollout.stdout.strip()}{self._diagnosis()}"
                )
        wait_for(
            self._replaced_pods,
            until=lambda replaced: not replaced,
            what="the pods of the release before gone",
            timeout=deadline.remaining(),
            interval=1,
            error=lambda replaced: ComponentError(
                f"airflow: {', '.join(replaced)} of the release before still terminating after "
                f"{ROLLOUT_TIMEOUT_SECONDS} s"
            ),
        )

    def _replaced_pods(self) -> list[str]:
        """The services' pods being deleted (a rolled-out deployment's old pods run out their grace)."""
        return [
            pod["metadata"]["name"]
            for pod in self._pods()
            if pod["metadata"].get("deletionTimestamp")
            and WORKER_POD_LABEL not in pod["metadata"].get("labels", {})
        ]

    def _diagnosis(self) -> str:
        """The first pod of the release that is not ready, and its last log lines; or nothing."""
        for pod in self._pods():
            if WORKER_POD_LABEL in pod["metadata"].get("labels", {}):
                continue  # a task's pod, kept after it failed: not the release's
            status = pod.get("status", {})
            containers = [
                *(status.get("initContainerStatuses") or []),
                *(status.get("containerStatuses") or []),
            ]
            if status.get("phase") == "Succeeded" or (containers and all(c.get("ready") for c in containers)):
                continue
            name = pod["metadata"]["name"]
            waiting = [
                f"{c['name']} {c['state'].get('waiting', {}).get('reason') or next(iter(c['state']))}"
                for c in containers
                if not c.get("ready")
            ]
            logs = ("-n", NAMESPACE, "logs", name, "--all-containers", "--tail=15")
            tail = self.environment.kubectl(*logs, check=False).strip().splitlines() or ["(none)"]
            state = "; ".join(waiting) or status.get("phase")
            indented = "\n".join(f"    {line}" for line in tail)
            return f"\n  pod {name} ({state}), its last log lines:\n{indented}"
        return ""

    def uninstall(self) -> None:
        """Remove the release; its namespace keeps the Secrets, the database its tables, for the next one.

        The Fernet key stays with the data it encrypted.
        """
        self._helm("uninstall", "--wait")
        (self.config.home / "airflow-release.sha256").unlink(missing_ok=True)

    # ---- the UI and its API ------------------------------------------------------------------------
    def serve_ui(self, port: int) -> str:
        """The api-server on ``127.0.0.1:port``, until ``stop_ui`` or ``make local-down``.

        ``kubectl port-forward`` follows one pod and ends when that pod goes (an upgrade, a restart):
        a loop of the environment's own starts it again, onto the pod that serves then.
        """
        config = self.config
        name = f"{UI_COMPONENT}-{port}"
        if processes.running_pid(name=name, run_dir=config.run_dir) is None:
            if processes.port_in_use(port):
                raise ComponentError(
                    f"airflow: port {port} is in use; stop what listens there or choose VIEW_PORT=<port>"
                )
            forward = [
                str(config.bin_dir / "kubectl"),
                f"--kubeconfig={config.kubeconfig}",
                f"--namespace={NAMESPACE}",
                "port-forward",
                "--address=127.0.0.1",
                API_SERVER_SERVICE,
                f"{port}:{API_SERVER_PORT}",
            ]
            loop = f"while :; do {shlex.join(forward)}; sleep 1; done"
            processes.start(
                name=name, argv=["bash", "-c", loop], log_dir=config.logs_dir, run_dir=config.run_dir
            )
        url = f"http://localhost:{port}"
        processes.wait_until(
            lambda: _answers(url),
            timeout=120,
            component=name,
            log_path=config.logs_dir / f"{name}.log",
            what="forwarding the api-server",
            alive=lambda: processes.running_pid(name=name, run_dir=config.run_dir) is not None,
        )
        return url

    def stop_ui(self, port: int) -> None:
        """Stop serving the UI on ``port``."""
        processes.stop(name=f"{UI_COMPONENT}-{port}", run_dir=self.config.run_dir)

    @contextmanager
    def served_api(self) -> Iterator[AirflowApi]:
        """The REST API on a free loopback port, logged in as its first user, until the block ends.

        It follows the release through upgrades (``serve_ui``).
        """
        port = processes.free_port()
        api = AirflowApi(self.serve_ui(port))
        try:
            yield api
        finally:
            api.close()
            self.stop_ui(port)


def container_that_cannot_start(pods: list[dict[str, Any]], *, since: datetime) -> str | None:
    """A container (``<pod>/<container>``) of ``pods`` (kubectl's listing) that failed again after ``since``.

    Init containers are left out: ``wait-for-airflow-migrations`` exits and is restarted while the
    migration job runs longer than its wait, as the chart intends. A failure before ``since`` (a
    container that was failing already) is not this deploy's; a container's first failure is not
    either (FAILURES_OF_A_CONTAINER_THAT_CANNOT_START).
    """
    for pod in pods:
        for status in pod.get("status", {}).get("containerStatuses") or []:
            ended = (status.get("lastState") or {}).get("terminated") or {}
            finished = ended.get("finishedAt")
            if (
                ended.get("exitCode", 0) != 0
                and finished
                and _timestamp(finished) >= since
                and status.get("restartCount", 0) >= FAILURES_OF_A_CONTAINER_THAT_CANNOT_START
            ):
                return f"{pod['metadata']['name']}/{status['name']}"
    return None


def _timestamp(text: str) -> datetime:
    """A Kubernetes timestamp (RFC 3339, ``2026-11-27T18:28:36Z``)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _shown(path: Path) -> str:
    """A path as the user knows it: relative to the checkout when it is in it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _answers(url: str) -> bool:
    """Whether an api-server answers its health check at ``url``."""
    try:
        return httpx.get(f"{url}/api/v2/monitor/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False
