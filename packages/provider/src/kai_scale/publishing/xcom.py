"""What ``publish_results`` leaves in XCom for the run's alert: its task id and the keys. Pure.

Apart from the task body, so the alert (run by the dag-processor and the triggerer) reads them without
importing what publishing needs (Kubernetes, S3, the change-point analysis).
"""

from __future__ import annotations

PUBLISH_TASK_ID = "publish_results"
RUN_SUMMARY_XCOM_KEY = "run_summary"
"""The run summary, as written to ``runs/<run-id>/run-summary.json``."""
VERDICTS_XCOM_KEY = "verdicts"
"""The whole ``verdicts.json``: the alert reads XComs, not the bucket."""
