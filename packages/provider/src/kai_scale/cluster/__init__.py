"""Preparing the target cluster and putting it back: setup and teardown steps, helm, their task bodies."""
