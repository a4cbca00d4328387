"""The local environment: a cluster with a real node and an S3 endpoint, PostgreSQL and a registry.

Its control plane and node are built from Go modules; KAI from source runs on the node, and the Airflow
deployment of ``make demo`` beside it.

It is what the tests run against and what ``make demo`` runs the nightly DAG on. See
docs/local-environment.md.
"""
