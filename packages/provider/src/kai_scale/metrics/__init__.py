"""Prometheus metrics of each scenario's window: the query profile, the API client, summaries."""
