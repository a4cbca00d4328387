"""Verdicts on a published run: thresholds, change points against history, comparison. Pure."""
