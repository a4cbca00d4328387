"""The local environment: a KWOK cluster built from Go modules, Prometheus and an S3 endpoint on loopback.

It is what the tests run against and what ``make demo`` runs the nightly DAG on. See
docs/local-environment.md.
"""
