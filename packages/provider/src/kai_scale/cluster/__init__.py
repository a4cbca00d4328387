"""Preparing the target cluster for a run and putting it back afterwards: the setup and teardown steps.

A module per thing prepared: ``inventory`` (the preflight), ``installs`` (KWOK, the charts, KAI's
ServiceMonitors), ``runner_access``, ``node_pool``, ``kai_setup`` (KAI's tuning), ``gpus`` (freed before
each scenario) and ``teardown``; ``manifests`` holds what they share. Each step is idempotent and fast
when its work is already done, because clearing a scenario task re-runs the setup; each returns the
lines it logs, so the task log says what was found and done. ``tasks`` makes the steps Airflow tasks.
"""
