"""Hooks: the Airflow connections of the cluster, the results bucket and Prometheus, and their I/O."""
