"""The body of the ``publish_results`` task: the run summary, the published run, its manifest entry."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from airflow.sdk import Context
from airflow.sdk.types import RuntimeTaskInstanceProtocol

from kai_scale.cluster.kai_tuning import load_profile
from kai_scale.hooks.cluster import ClusterHook
from kai_scale.hooks.cluster_errors import ClusterError
from kai_scale.hooks.results_bucket import ResultsBucketHook
from kai_scale.metrics.collection import metrics_to_publish, missing_scenarios, pods_bound, public_metrics
from kai_scale.object_keys import (
    published_keys,
    run_file_key,
    run_metrics_key,
    run_profiles_key,
    run_summary_key,
)
from kai_scale.operators.scenario_pod import recorded_image, recorded_outputs
from kai_scale.params import image_reference
from kai_scale.profiles.collection import profile_files, profiles_to_publish, without_gone_files
from kai_scale.publishing.publisher import copy_run_files, publish_run
from kai_scale.publishing.results_document import (
    RunMetadata,
    commit_hash,
    ginkgo_focus,
    manifest_entry,
    results_document,
    service_resources,
    timestamp,
)
from kai_scale.publishing.run_summary import RunSummary, ScenarioEntry, run_summary, scenario_entry
from kai_scale.publishing.xcom import RUN_SUMMARY_XCOM_KEY, VERDICTS_XCOM_KEY
from kai_scale.run_id import run_id_of
from kai_scale.settings import PipelineSettings
from kai_scale_model import kai
from kai_scale_model.runner_interface import GINKGO_REPORT, OUTCOME
from kai_scale_model.scenario import Scenario

log = logging.getLogger(__name__)


class RunFailedError(RuntimeError):
    """A scenario failed or did not run, or metrics or a report are missing; raised after publishing."""


def _entries(
    ti: RuntimeTaskInstanceProtocol,
    bucket: ResultsBucketHook,
    scenarios: Sequence[Scenario],
    selected: Sequence[str],
) -> list[ScenarioEntry]:
    entries = []
    for scenario in scenarios:
        outputs = recorded_outputs(ti, scenario.name)
        entry = scenario_entry(
            scenario=scenario.name,
            selected=scenario.name in selected,
            outputs=outputs,
            outcome_text=bucket.read_text(outputs["keys"][OUTCOME]) if outputs else None,
            ginkgo_report_exists=outputs is not None and bucket.exists(outputs["keys"][GINKGO_REPORT]),
        )
        log.info("%s: %s%s", entry.scenario, entry.status, f" ({entry.reason})" if entry.reason else "")
        entries.append(entry)
    return entries


@dataclass(frozen=True, kw_only=True)
class DeployedState:
    """What the cluster runs, read when the run is published (None / empty when it did not answer)."""

    node_count: int | None
    """All nodes of the cluster."""
    kubernetes_version: str | None
    """The API server's version."""
    kai_images: dict[str, list[str]]
    """Each deployment of KAI's namespace and its images: the KAI that was really tested."""


def _deployed_state(cluster: ClusterHook) -> DeployedState:
    # Results are never held hostage by the cluster: unreachable (or refusing) means unknown.
    try:
        return DeployedState(
            node_count=cluster.node_count(),
            kubernetes_version=cluster.server_version(),
            kai_images=cluster.deployment_images(kai.NAMESPACE),
        )
    except ClusterError as error:
        log.warning("what the cluster runs is unknown: %s", error)
        return DeployedState(node_count=None, kubernetes_version=None, kai_images={})


def publish_results(
    *, settings: PipelineSettings, scenarios: Sequence[Scenario], context: Context
) -> RunSummary:
    """Publish the run: results.json, ginkgo-report.json, metrics.json, then its manifest entry.

    Returns the run summary. A failed or not-run scenario, missing metrics or a left-out report fail
    the task after everything is published.
    """
    ti, params, dag_run = context["ti"], context["params"], context["dag_run"]
    bucket = ResultsBucketHook(aws_conn_id=settings.aws_conn_id, bucket=settings.results_bucket)
    run_id = run_id_of(dag_run)
    runner_image = image_reference(settings.runner_image, params["runner_tag"])
    image_ids = {
        s.name: (recorded_image(ti, s.name) or {}).get("image_id")
        for s in scenarios
        if s.name in params["scenarios"]
    }
    with bucket.errors_named(f"read the outputs of run {run_id} and write its run summary"):
        entries = _entries(ti, bucket, scenarios, params["scenarios"])
        summary = run_summary(
            run_id=run_id, params=params, entries=entries, runner_image=runner_image, image_ids=image_ids
        )
        metrics_text = bucket.read_text(run_metrics_key(run_id))
        profiles_text = bucket.read_text(run_profiles_key(run_id))

    with ClusterHook(conn_id=settings.kubernetes_conn_id) as cluster:
        deployed = _deployed_state(cluster)
    metadata = RunMetadata(
        kai_scheduler_ref=params["kai_ref"],
        kai_commit_hash=commit_hash(entries),
        kwok_node_count=params["node_count"],
        cluster_node_count=deployed.node_count,
        test_focus=ginkgo_focus(scenarios, params["scenarios"]),
        timestamp=timestamp(dag_run.run_after),
        service_resources=service_resources(
            load_profile(settings.include_dir, settings.kai_tuning_profile).patches
        ),
        kubernetes_version=deployed.kubernetes_version,
        kai_images=deployed.kai_images,
        runner_image=runner_image,
        runner_image_ids=image_ids,
    )
    selected = [s for s in scenarios if s.name in params["scenarios"]]
    profiles = profiles_to_publish(
        profiles_text,
        run_id=run_id,
        scenarios=[s.name for s in selected],
        source=f"s3://{settings.results_bucket}/{run_profiles_key(run_id)}",
    )
    # Copied first, so results.json and the verdicts name only the profile files that were published.
    copying = (
        f"copy the profile files of run {run_id} from runs/ to {settings.results_prefix} (its results, "
        "verdicts and manifest entry, written after them, were not)"
    )
    with bucket.errors_named(copying):
        gone = copy_run_files(
            bucket, prefix=settings.results_prefix, run_id=run_id, files=profile_files(profiles)
        )
    profiles = without_gone_files(profiles, gone)
    for file in gone:
        # A profile is never worth failing a night for (docs/results.md): it is published as missing.
        log.warning(
            "%s was gone from s3://%s/%s: published as missing",
            file,
            settings.results_bucket,
            run_file_key(run_id, file),
        )
    results = results_document(metadata=metadata, entries=entries, profiles=profiles)
    metrics, unreadable = metrics_to_publish(
        metrics_text,
        run_id=run_id,
        scenarios=selected,
        source=f"s3://{settings.results_bucket}/{run_metrics_key(run_id)}",
    )
    # Imported here: Otava and SciPy cost ~0.5 s, which every parse of the DAG file would pay.
    from kai_scale.publishing.verdicts_step import detail_rules, judge_run  # noqa: PLC0415

    with bucket.errors_named(f"read the history that run {run_id} is judged against"):
        verdicts = judge_run(
            bucket,
            prefix=settings.results_prefix,
            run_id=run_id,
            node_count=params["node_count"],
            # Thresholds bound what a scenario measured: a failed, not-run or skipped one is reported
            # as such.
            scenarios=[s for s, e in zip(scenarios, entries, strict=True) if e.status == "success"],
            tests=results.model_dump(mode="json")["results"]["tests"],
            scenario_tests={
                e.scenario: [asdict(test) for test in e.outcome.tests]
                for e in entries
                if e.outcome and e.outcome.tests
            },
            include_dir=str(settings.include_dir),
            profiles=profiles,
            run_pods={
                name: pods_bound(entry.model_dump(mode="json")) for name, entry in metrics.scenarios.items()
            },
            rules=detail_rules(scenarios),
        )
    summary = summary.judged(verdict=verdicts.verdict, reasons=verdicts.reasons)
    written = summary.model_dump(mode="json")
    with bucket.errors_named(f"write the run summary of run {run_id}"):
        bucket.write_text(key=run_summary_key(run_id), text=json.dumps(written, indent=2))
    ti.xcom_push(key=RUN_SUMMARY_XCOM_KEY, value=written)
    ti.xcom_push(key=VERDICTS_XCOM_KEY, value=verdicts.model_dump(mode="json"))
    log.info("verdict: %s", verdicts.verdict)
    for reason in verdicts.reasons:
        log.info("  %s", reason)
    published = publish_run(
        bucket,
        prefix=settings.results_prefix,
        run_id=run_id,
        results=results.model_dump(mode="json"),
        metrics_text=json.dumps(public_metrics(metrics)),
        verdicts=verdicts.model_dump(mode="json"),
        ginkgo_report_keys={e.scenario: e.ginkgo_report_key for e in entries},
        entry=manifest_entry(
            run_id=run_id,
            results_key=published_keys(prefix=settings.results_prefix, run_id=run_id).results,
            metadata=metadata,
            status=summary.status,
            airflow_run_id=dag_run.run_id,
            verdict=verdicts.verdict,
            failure_kind=summary.failure_kind,
            failed_scenarios=summary.failed_scenarios,
            not_run_scenarios=summary.not_run_scenarios,
        ).model_dump(mode="json"),
    )
    where = f"s3://{settings.results_bucket}/{published.keys.results}"
    log.info(
        "published %s (+ ginkgo-report.json, metrics.json, verdicts.json, profiles) and its entry in %s",
        where,
        published.manifest_key,
    )
    problems = [f"{e.scenario}: {e.reason}" for e in entries if e.status in ("failure", "not_run")]
    problems += published.problems
    if unreadable is not None:
        problems.append(unreadable)
    missing = missing_scenarios(metrics)
    if missing:
        problems.append(f"metrics missing for {', '.join(missing)} (see collect_metrics)")
    # A breach, a regression or a threshold on nothing fails the run too, after publishing; failed
    # tests are already there through their scenarios.
    problems += verdicts.findings
    if problems:
        # Published first, then failed: the run shows as failed, and its results are complete.
        raise RunFailedError(f"run published to {where}, with problems: " + "; ".join(problems))
    return summary
