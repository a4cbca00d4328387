from __future__ import annotations

import yaml

from localenv.charts import VENDOR_CHARTS
from tests.conftest import REPO


def test_the_local_charts_are_the_versions_the_setup_installs() -> None:
    installs = yaml.safe_load((REPO / "include" / "manifests" / "installs.yaml").read_text())["charts"]
    for chart in VENDOR_CHARTS:
        assert installs[chart.name]["version"] == chart.version, chart.name
        # Where the publisher serves it: the OCI name, or the OCI twin of its HTTP repository.
        assert installs[chart.name]["chart"] in {f"oci://{chart.reference}", chart.name}, chart.name
