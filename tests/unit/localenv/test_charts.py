from __future__ import annotations

from localenv import pins
from localenv.charts import VENDOR_CHARTS


def test_the_local_charts_are_served_where_the_setup_installs_them_from() -> None:
    """Their versions are read from installs.yaml (localenv.pins); where they are served must match it."""
    charts = pins.installs().charts
    for chart in VENDOR_CHARTS:
        # Where the publisher serves it: the OCI name, or the OCI twin of its HTTP repository.
        assert charts[chart.name].chart in {f"oci://{chart.reference}", chart.name}, chart.name
