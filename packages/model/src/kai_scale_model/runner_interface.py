"""What passes between the pipeline and a runner pod: the pod's environment and the runner's uploads.

The pipeline's operator sets these variables and presigns one upload URL per output; the runner reads
the variables and uploads its files by these names. Pure: names only, so both sides agree by import.
"""

from __future__ import annotations

IMAGE_REPOSITORY = "ghcr.io/kai-scale-pipeline/runner"
"""Where the runner image is published: the pipeline's default ``KAI_SCALE_RUNNER_IMAGE``, and where
the local environment pushes the runner image it builds."""

SCENARIO_ENV = "KAI_SCALE_SCENARIO"
"""The scenario, as the JSON of ``kai_scale_model.scenario.Scenario``."""
NODE_COUNT_ENV = "NODE_COUNT"
"""The KWOK node count of the run; the KAI suite reads the same variable."""
RUN_ID_ENV = "KAI_SCALE_RUN_ID"
"""The pipeline's run id (labels of the workload's pods)."""
NAMESPACE_ENV = "POD_NAMESPACE"
"""The runner pod's own namespace, from the downward API."""
OUTPUT_URLS_ENV = "KAI_SCALE_OUTPUT_URLS"
"""A JSON object: output name -> presigned PUT URL."""

PIPELINE_ENV = (SCENARIO_ENV, NODE_COUNT_ENV, RUN_ID_ENV, NAMESPACE_ENV, OUTPUT_URLS_ENV)
"""The variables the pipeline sets on a runner pod: a scenario file cannot override them."""

OUTCOME = "outcome"
"""The scenario outcome, ``outcome.json`` (``kai_scale_model.outcome.ScenarioOutcome``)."""
GINKGO_REPORT = "ginkgo-report"
"""The KAI suite's own Ginkgo JSON report, ``ginkgo-report.json`` (suite scenarios only)."""
SUITE_RESULTS = "kwok_scale_test"
"""The KAI suite's own results file, ``kwok_scale_test.json``, as the suite wrote it (suite scenarios
only): the outcome's entries are read from it, and anyone can compare them with it."""
OUTPUTS = (GINKGO_REPORT, SUITE_RESULTS, OUTCOME)
"""Every output, in upload order: the outcome goes last, so once it exists the rest do too."""

NOT_RUN_EXIT_CODE = 3
"""The runner's exit status when its scenario did not run (KAI missing or not ready): the task fails
saying so. The others: 0 success, 1 failure, 2 bad input."""


def output_file(name: str) -> str:
    """The file name of an output, e.g. ``outcome.json``."""
    return f"{name}.json"
