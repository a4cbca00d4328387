"""Airflow operators of the pipeline."""
