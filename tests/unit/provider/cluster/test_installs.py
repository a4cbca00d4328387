"""installs.yaml as a model: every reader gets attributes, and a malformed file names the file and field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kai_scale.cluster.installs import read_installs
from kai_scale_model.installs import INSTALLS_FILE, InstallsError
from tests.conftest import REPO

SHIPPED = yaml.safe_load((REPO / "include" / INSTALLS_FILE).read_text())


def _include(tmp_path: Path, text: str) -> Path:
    (tmp_path / INSTALLS_FILE).parent.mkdir(parents=True)
    (tmp_path / INSTALLS_FILE).write_text(text)
    return tmp_path


def _edited(edit: dict[str, object], *, drop: tuple[str, str] | None = None) -> str:
    document = {part: dict(value) for part, value in SHIPPED.items()}
    for dotted, value in edit.items():
        part, key = dotted.split(".", 1)
        document[part][key] = value
    if drop:
        del document[drop[0]][drop[1]]
    return yaml.safe_dump(document)


def test_the_shipped_file_is_read_as_written() -> None:
    installs = read_installs(REPO / "include")
    assert installs.kwok.version == SHIPPED["kwok"]["version"]
    assert installs.kwok.delete_stages == ("pod-complete",)
    chart = installs.charts["kube-prometheus-stack"]
    assert chart.values == SHIPPED["charts"]["kube-prometheus-stack"]["set"], "'set' is read as values"
    assert chart.repo is None
    assert installs.charts["pyroscope"].repo == "https://grafana.github.io/helm-charts"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_edited({}, drop=("kwok", "version")), "'kwok.version' Field required"),
        (_edited({"kwok.version": 8}), "'kwok.version' Input should be a valid string"),
        (
            _edited({"kwok_operator.manifests": []}),
            "'kwok_operator.manifests' Tuple should have at least 1 item",
        ),
        (
            _edited({"kwok.delete_stage": ["pod-complete"]}),
            "'kwok.delete_stage' Extra inputs are not permitted",
        ),
        (
            _edited({"charts.pyroscope": {**SHIPPED["charts"]["pyroscope"], "set": {"replicas": 2}}}),
            "'charts.pyroscope.set.replicas' Input should be a valid string",
        ),
        (
            _edited({"charts.pyroscope": {**SHIPPED["charts"]["pyroscope"], "values": {}}}),
            "'charts.pyroscope.values' Extra inputs are not permitted",
        ),
        ("[kwok]\n", "'(top level)' Input should be a valid dictionary"),
    ],
)
def test_a_malformed_file_names_the_file_and_the_field(tmp_path: Path, text: str, message: str) -> None:
    include_dir = _include(tmp_path, text)
    with pytest.raises(InstallsError) as raised:
        read_installs(include_dir)
    assert str(raised.value).startswith(f"installs file {include_dir / INSTALLS_FILE}: ")
    assert message in str(raised.value)


def test_a_file_without_a_chart_the_setup_installs_is_refused(tmp_path: Path) -> None:
    charts = {release: spec for release, spec in SHIPPED["charts"].items() if release != "pyroscope"}
    include_dir = _include(tmp_path, yaml.safe_dump({**SHIPPED, "charts": charts}))
    with pytest.raises(InstallsError, match=r"'charts' lacks pyroscope, which the setup installs"):
        read_installs(include_dir)


def test_a_file_that_is_not_yaml_says_so(tmp_path: Path) -> None:
    include_dir = _include(tmp_path, "kwok: [\n")
    with pytest.raises(InstallsError, match=r"installs file .*installs.yaml: not valid YAML"):
        read_installs(include_dir)
