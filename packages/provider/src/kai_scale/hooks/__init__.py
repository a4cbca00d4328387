"""Hooks: I/O with the cluster (its API, helm), the results bucket, Prometheus and release manifests."""
