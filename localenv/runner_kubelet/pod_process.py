"""One runner pod, run as a local process: start, report status, stop on deletion or deadline."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from localenv.runner_images import ImageNotRunnable, RunnableImage, local_argv
from localenv.runner_kubelet import status
from localenv.runner_kubelet.container_env import DataLookup, EnvError, resolve
from localenv.runner_kubelet.logs import ContainerLog

log = logging.getLogger(__name__)

# Issues the pod's service-account credentials; returns the variables that point the process at them.
CredentialsIssuer = Callable[[dict[str, Any], Path], Mapping[str, str]]

DEADLINE_REASON = "DeadlineExceeded"


@dataclass(frozen=True, kw_only=True)
class PodContext:
    """What a runner pod needs from the node that runs it."""

    mapping: Sequence[RunnableImage]
    """Images that have a local stand-in."""
    sandbox_root: Path
    """Parent of the per-pod working directories."""
    executable_path: str
    """PATH of the pods' processes (the runner's virtual environment first)."""
    secrets: DataLookup
    """Reads a Secret's data."""
    config_maps: DataLookup
    """Reads a ConfigMap's data."""
    issue_credentials: CredentialsIssuer
    """Mints the pod's service-account token and writes its kubeconfig."""
    write_status: Callable[[dict[str, Any], dict[str, Any]], None]
    """Patches (pod, status body) to the API server."""


class PodProcess:
    """The local process behind one runner pod."""

    def __init__(self, *, pod: dict[str, Any], context: PodContext) -> None:
        self.pod = pod
        self.uid: str = pod["metadata"]["uid"]
        self.context = context
        self.sandbox = context.sandbox_root / self.uid
        self.log = ContainerLog(self.sandbox / "container.log")
        self.container_name: str = pod["spec"]["containers"][0]["name"]
        self._process: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._deadline_hit = threading.Event()
        self.finished = threading.Event()

    def run(self) -> None:
        """Start the process, report Running, wait for it and report how it ended (a thread target)."""
        try:
            self._run()
        except Exception:
            log.exception("runner pod %s failed in the kubelet double", self._name())
        finally:
            self.finished.set()

    def _name(self) -> str:
        return f"{self.pod['metadata']['namespace']}/{self.pod['metadata']['name']}"

    def _run(self) -> None:
        spec = self.pod["spec"]
        now = datetime.now(UTC)
        unsupported = _unsupported_shape(spec)
        if unsupported:
            self._write(
                status.failed_unsupported(reason="UnsupportedByRunnerNode", message=unsupported, now=now)
            )
            return
        container = spec["containers"][0]
        image = container["image"]
        try:
            argv = local_argv(
                image=image,
                command=container.get("command"),
                args=container.get("args"),
                mapping=self.context.mapping,
            )
        except ImageNotRunnable as error:
            self._write(
                status.waiting(
                    container=self.container_name,
                    image=image,
                    reason="ErrImagePull",
                    message=str(error),
                    now=now,
                )
            )
            return
        try:
            env = resolve(
                pod=self.pod,
                container=container,
                secrets=self.context.secrets,
                config_maps=self.context.config_maps,
            )
        except EnvError as error:
            self._write(
                status.waiting(
                    container=self.container_name,
                    image=image,
                    reason="CreateContainerConfigError",
                    message=str(error),
                    now=now,
                )
            )
            return
        self.sandbox.mkdir(parents=True, exist_ok=True)
        try:
            credentials = self.context.issue_credentials(self.pod, self.sandbox)
        except Exception as error:  # the API's reason is what the pod's status should show
            self._write(
                status.waiting(
                    container=self.container_name,
                    image=image,
                    reason="CreateContainerConfigError",
                    message=f"cannot issue the service account token: {error}",
                    now=now,
                )
            )
            return
        base_env = {
            "PATH": self.context.executable_path,
            "HOME": str(self.sandbox),
            "HOSTNAME": self.pod["metadata"]["name"],
            "LANG": "C.UTF-8",
            **credentials,
        }
        try:
            self._process = subprocess.Popen(
                argv,
                cwd=self.sandbox,
                env={**base_env, **env},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as error:
            # What a container runtime reports when the entrypoint cannot be executed.
            self._write(
                status.terminated(
                    container=self.container_name,
                    image=image,
                    pid=0,
                    exit_code=128,
                    message=f"failed to start {argv[0]!r}: {error}",
                    started=now,
                    finished=now,
                )
            )
            return
        process = self._process
        started = datetime.now(UTC)
        self._write(
            status.running(container=self.container_name, image=image, pid=process.pid, started=started)
        )
        pumps = [
            threading.Thread(target=self.log.pump, args=(pipe, stream), daemon=True)
            for pipe, stream in ((process.stdout, "stdout"), (process.stderr, "stderr"))
        ]
        for pump in pumps:
            pump.start()
        deadline = spec.get("activeDeadlineSeconds")
        timer = threading.Timer(float(deadline), self._deadline_exceeded) if deadline else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        exit_code = process.wait()
        if timer is not None:
            timer.cancel()
        for pump in pumps:
            pump.join(timeout=5)
        if self._stopping.is_set() and not self._deadline_hit.is_set():
            return  # deleted: the pod object is going away, nothing to report
        self._write(self._terminated_status(container, image, exit_code, started))

    def _terminated_status(
        self, container: dict[str, Any], image: str, exit_code: int, started: datetime
    ) -> dict[str, Any]:
        assert self._process is not None
        # A signal shows as 128 + signal number, as container runtimes report it.
        exit_code = 128 - exit_code if exit_code < 0 else exit_code
        policy = container.get("terminationMessagePolicy") or "File"
        message = self.log.tail_message() if policy == "FallbackToLogsOnError" and exit_code != 0 else ""
        pod_reason = pod_message = None
        if self._deadline_hit.is_set():
            pod_reason = DEADLINE_REASON
            pod_message = "Pod was active on the node longer than the specified deadline"
            exit_code = exit_code or 137
        return status.terminated(
            container=self.container_name,
            image=image,
            pid=self._process.pid,
            exit_code=exit_code,
            message=message,
            started=started,
            finished=datetime.now(UTC),
            pod_reason=pod_reason,
            pod_message=pod_message,
        )

    def _deadline_exceeded(self) -> None:
        log.info("runner pod %s exceeded its activeDeadlineSeconds; stopping it", self._name())
        self._deadline_hit.set()
        self.stop(grace_seconds=float(self.pod["spec"].get("terminationGracePeriodSeconds") or 30))

    def stop(self, *, grace_seconds: float) -> None:
        """Stop the process (TERM, then KILL after the grace period), as the kubelet does on deletion."""
        self._stopping.set()
        process = self._process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def _write(self, body: dict[str, Any]) -> None:
        self.context.write_status(self.pod, body)


def _unsupported_shape(spec: dict[str, Any]) -> str | None:
    """Why the runner node will not run this pod, or None. It runs one container, nothing more."""
    if len(spec.get("containers") or []) != 1:
        return "the runner node runs pods with exactly one container"
    if spec.get("initContainers"):
        return "the runner node does not run init containers"
    if spec.get("restartPolicy", "Always") != "Never":
        return "the runner node runs pods with restartPolicy Never only (runner pods are never restarted)"
    return None
