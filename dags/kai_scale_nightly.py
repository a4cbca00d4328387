"""
# KAI scheduler nightly scale tests

Prepares the target cluster (KWOK and its stages, kwok-operator's NodePool sized to `node_count`, the
fake GPU operator, Prometheus stack and Pyroscope, ServiceMonitors, KAI tuned for scale), runs each
scenario of `include/scenarios/` in its own runner pod, one at a time, writes the run's summary, and
tears the environment down, also after failures.

**Trigger** with `node_count` (1-10000), the `scenarios` to run, the KAI ref and the runner image tag.
**Retry one scenario** from the Airflow UI: clear its `run_*` task; its setup re-runs, then the summary
and the teardown.
How it works: docs/architecture.md; what to do when a night fails: docs/runbook.md.
"""

from __future__ import annotations

from pathlib import Path

# Named here so the dag-processor imports the provider once, before it forks a parser per file
# ([dag_processor] parsing_pre_import_modules), instead of in every parse: it is most of the cost.
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator  # noqa: F401

from kai_scale.dag_factory import build_nightly_dag
from kai_scale.scenario_files import load_scenarios
from kai_scale.settings import PipelineSettings

# The project's include/ sits beside dags/, in the repository and in the Airflow image alike.
settings = PipelineSettings.from_environment(
    default_include_dir=Path(__file__).resolve().parents[1] / "include"
)
dag = build_nightly_dag(
    dag_id="kai_scale_nightly",
    scenarios=load_scenarios(settings.scenarios_dir),
    doc_md=__doc__ or "",
    settings=settings,
)
