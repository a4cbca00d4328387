"""Deployment settings of the pipeline, read from the worker's environment when a task runs.

Nothing here is read when a DAG file is parsed, so parsing never depends on a deployment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_RUNNER_IMAGE = "ghcr.io/kai-scale-pipeline/runner"


@dataclass(frozen=True, kw_only=True)
class PipelineSettings:
    """Where the pipeline runs and where its results go."""

    kubernetes_conn_id: str
    """Airflow connection of the target cluster."""
    aws_conn_id: str
    """Airflow connection of the results bucket (may carry an ``endpoint_url``)."""
    prometheus_conn_id: str
    """Airflow connection (type ``prometheus``) of the Prometheus that watches the target cluster."""
    results_bucket: str
    """Bucket of the run outputs and the published results."""
    results_prefix: str
    """Prefix of the published results (``Public/``)."""
    namespace: str
    """Namespace of the runner pods and the workload pods."""
    runner_image: str
    """Repository of the runner image; a run picks only its tag or digest (param ``runner_tag``)."""
    include_dir: Path
    """The ``include/`` directory: scenarios and manifests."""
    retry_delay_seconds: int
    """Delay before a setup or teardown task is retried."""

    @classmethod
    def from_environment(cls, *, default_include_dir: Path) -> PipelineSettings:
        """Read ``KAI_SCALE_*`` variables, with defaults for the local environment.

        :param default_include_dir: the ``include/`` beside the DAG files, unless ``KAI_SCALE_INCLUDE_DIR``
            names another.
        """
        prefix = os.environ.get("KAI_SCALE_RESULTS_PREFIX", "Public/")
        return cls(
            kubernetes_conn_id=os.environ.get("KAI_SCALE_KUBERNETES_CONN_ID", "kubernetes_default"),
            aws_conn_id=os.environ.get("KAI_SCALE_AWS_CONN_ID", "aws_default"),
            prometheus_conn_id=os.environ.get("KAI_SCALE_PROMETHEUS_CONN_ID", "prometheus_default"),
            results_bucket=os.environ.get("KAI_SCALE_RESULTS_BUCKET", "kai-scale-results"),
            results_prefix=prefix if prefix.endswith("/") or not prefix else f"{prefix}/",
            namespace=os.environ.get("KAI_SCALE_NAMESPACE", "kai-scale"),
            runner_image=os.environ.get("KAI_SCALE_RUNNER_IMAGE", DEFAULT_RUNNER_IMAGE),
            include_dir=Path(os.environ.get("KAI_SCALE_INCLUDE_DIR", default_include_dir)),
            retry_delay_seconds=int(os.environ.get("KAI_SCALE_RETRY_DELAY_SECONDS", "30")),
        )
