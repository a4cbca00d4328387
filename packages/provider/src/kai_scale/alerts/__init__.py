"""Alerts about failed and overdue runs: what they say (pure), what they read from Airflow, the wiring."""
