from __future__ import annotations

import yaml

from localenv.charts import VENDOR_CHARTS
from tests.conftest import REPO


def test_the_local_charts_are_served_where_the_setup_installs_them_from() -> None:
    """Their versions are read from installs.yaml (localenv.pins); where they are served must match it."""
    installs = yaml.safe_load((REPO / "include" / "manifests" / "installs.yaml").read_text())["charts"]
    for chart in VENDOR_CHARTS:
        # Where the publisher serves it: the OCI name, or the OCI twin of its HTTP repository.
        assert installs[chart.name]["chart"] in {f"oci://{chart.reference}", chart.name}, chart.name
