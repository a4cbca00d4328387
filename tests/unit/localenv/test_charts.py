from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from localenv import pins
from localenv.charts import PYROSCOPE_CHART, VENDOR_CHARTS, ChartPusher, vendor_dir
from localenv.settings import Settings


def test_the_local_charts_are_served_where_the_setup_installs_them_from() -> None:
    """Their versions are read from installs.yaml (localenv.pins); where they are served must match it."""
    charts = pins.installs().charts
    for chart in VENDOR_CHARTS:
        # Where the publisher serves it: the OCI name, or the OCI twin of its HTTP repository.
        assert charts[chart.name].chart in {f"oci://{chart.reference}", chart.name}, chart.name


def test_pyroscope_is_served_from_the_mirror_as_a_chart_repository_and_renders_with_the_pinned_values(
    tmp_path: Path,
) -> None:
    """Packaged from its source snapshot with real helm, indexed, and rendered with installs.yaml's values.

    One StatefulSet of the server the local environment builds (the chart's appVersion is older), its
    bundled collectors off; no test pulls it over HTTP here (the mirror component serves the directory:
    the deployment's first night installs it from there).
    """
    helm = Settings.from_environment().helm_dir / "helm"
    pusher = ChartPusher(
        helm=helm, registry="unused", vendor=vendor_dir(), mirror=tmp_path, log_path=tmp_path / "helm.log"
    )
    pusher.serve_from_mirror(PYROSCOPE_CHART)
    repository = tmp_path / "grafana.github.io" / "helm-charts"
    index = yaml.safe_load((repository / "index.yaml").read_text())
    [entry] = index["entries"]["pyroscope"]
    assert (entry["version"], entry["urls"]) == (PYROSCOPE_CHART.version, ["pyroscope-2.1.2.tgz"])
    pinned = pins.installs().charts["pyroscope"]
    assert pinned.repo == f"https://{PYROSCOPE_CHART.mirror_path}"
    values = [f"--set={key}={value}" for key, value in pinned.values.items()]
    rendered = subprocess.run(
        [str(helm), "template", "pyroscope", str(repository / "pyroscope-2.1.2.tgz"), *values],
        capture_output=True,
        text=True,
        check=True,
    )
    workloads = [
        document
        for document in yaml.safe_load_all(rendered.stdout)
        if document and document["kind"] in {"StatefulSet", "Deployment", "DaemonSet"}
    ]
    assert [(w["kind"], w["metadata"]["name"]) for w in workloads] == [("StatefulSet", "pyroscope")]
    [container] = workloads[0]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"grafana/pyroscope:{pins.pyroscope_version()}"
