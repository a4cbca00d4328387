"""Hooks: the only modules that talk to the cluster, the bucket or helm."""
