"""Prometheus metrics of each scenario's window: the query profile, the client, summaries."""
