"""Scenarios: what one runner pod runs, as declared in ``include/scenarios/*.yaml``."""
