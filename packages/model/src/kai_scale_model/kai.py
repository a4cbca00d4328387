"""The KAI scheduler's names that the pipeline, the runner and the local environment rely on. Pure.

KAI's defaults, which a cluster admin's install keeps (``pkg/common/constants``, ``config_types.go``,
``global.go``): its operator runs every service in its Config's ``spec.namespace``, and the scheduler
of each SchedulingShard as the Deployment ``<spec.global.schedulerName>-<shard>``
(``pkg/operator/operands/scheduler``: ``DeploymentName``), its pods labelled ``app=<that name>``.
"""

from __future__ import annotations

QUEUE_CRD = "queues.scheduling.run.ai"
"""KAI's Queue CRD: every KAI installation has it, and KAI's suite cannot run without it."""
SHARD_CRD = "schedulingshards.kai.scheduler"
"""KAI's SchedulingShard CRD, whose objects the scale tuning patches."""
NAMESPACE = "kai-scheduler"
"""KAI's namespace, its Config's ``spec.namespace`` by default: where its services run."""
SCHEDULER_NAME = "kai-scheduler"
"""The ``schedulerName`` of pods KAI schedules (its default ``spec.global.schedulerName``, what its
scale suite uses)."""
DEFAULT_SHARD = "default"
"""The SchedulingShard KAI's install makes."""
SCHEDULER_APP = f"{SCHEDULER_NAME}-{DEFAULT_SHARD}"
"""The default shard's scheduler Deployment, and the ``app`` label of its pods (the pods KAI's suite
waits for, ``test/e2e/modules/constant``)."""
