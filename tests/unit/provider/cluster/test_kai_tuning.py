"""KAI's tuning profiles: the shipped ones, how one extends another, and what a bad file is told."""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from kai_scale.cluster.kai_tuning import (
    TuningError,
    TuningPatch,
    load_profile,
    merge,
    profile_names,
    quantity,
)
from tests.conftest import REPO

INCLUDE = REPO / "include"
SIZE_PATH = re.compile(r"spec\.\w+\.(replicas|service\.resources\..*)")


def _include(tmp_path: Path, **profiles: str) -> Path:
    """An include/ with the shipped profiles, plus or instead of those given (name=YAML text)."""
    include = tmp_path / "include"
    shutil.copytree(INCLUDE / "manifests" / "kai-tuning", include / "manifests" / "kai-tuning")
    for name, text in profiles.items():
        (include / "manifests" / "kai-tuning" / f"{name}.yaml").write_text(text)
    return include


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    if not isinstance(value, dict):
        return {path: value}
    return {
        k: v for key, inner in value.items() for k, v in _leaves(inner, f"{path}.{key}".lstrip(".")).items()
    }


def _by_object(patches: Sequence[TuningPatch]) -> dict[str, dict[str, Any]]:
    return {f"{p.kind} {p.name}": _leaves(p.patch) for p in patches}


def test_the_shipped_profiles_are_scale_local_and_local_unprofiled() -> None:
    assert profile_names(INCLUDE) == ["local", "local-unprofiled", "scale"]
    scale = load_profile(INCLUDE, "scale")
    assert scale.path == INCLUDE / "manifests" / "kai-tuning" / "scale.yaml"
    assert [(p.kind, p.name) for p in scale.patches] == [
        ("SchedulingShard", "default"),
        ("Config", "kai-config"),
    ]
    config = scale.patches[1].patch["spec"]
    assert config["scheduler"]["service"]["resources"]["requests"] == {"cpu": "3", "memory": "7Gi"}
    assert config["binder"]["maxConcurrentReconciles"] == 100
    assert config["admission"]["replicas"] == 4


def test_the_local_profile_keeps_every_setting_of_scale_but_the_sizes() -> None:
    scale = _by_object(load_profile(INCLUDE, "scale").patches)
    local = _by_object(load_profile(INCLUDE, "local").patches)
    assert set(local) == set(scale)
    for target, fields in scale.items():
        assert set(local[target]) == set(fields), target
        changed = [path for path, value in fields.items() if local[target][path] != value]
        assert all(SIZE_PATH.fullmatch(path) for path in changed), (target, changed)
    # What the local environment has no room for: the scheduler's 3 CPUs, the binder's 2.5 GiB.
    assert local["SchedulingShard default"] == scale["SchedulingShard default"]
    assert local["Config kai-config"]["spec.binder.maxConcurrentReconciles"] == 100
    assert local["Config kai-config"]["spec.admission.replicas"] == 1


def test_the_unprofiled_profile_is_local_without_pyroscope() -> None:
    """KAI's scheduler starts its Pyroscope agent only for a non-empty address (cmd/scheduler/app)."""
    local = _by_object(load_profile(INCLUDE, "local").patches)
    unprofiled = _by_object(load_profile(INCLUDE, "local-unprofiled").patches)
    address = "spec.args.pyroscope-address"
    assert local["SchedulingShard default"][address].startswith("http://pyroscope.")
    assert unprofiled["SchedulingShard default"] == {**local["SchedulingShard default"], address: ""}
    assert unprofiled["Config kai-config"] == local["Config kai-config"]


def test_the_local_profile_fits_a_2_cpu_node_beside_everything_else() -> None:
    config = _by_object(load_profile(INCLUDE, "local").patches)["Config kai-config"]
    cpu_requests = {path: quantity(v) for path, v in config.items() if path.endswith("requests.cpu")}
    assert cpu_requests["spec.scheduler.service.resources.requests.cpu"] <= Decimal("0.25")
    others = [v for path, v in cpu_requests.items() if ".scheduler." not in path]
    assert others
    assert all(v <= Decimal("0.1") for v in others)
    assert sum(cpu_requests.values()) <= Decimal("0.6")


def test_an_unknown_profile_names_the_available_ones(tmp_path: Path) -> None:
    with pytest.raises(
        TuningError,
        match=r"no tuning profile 'big' in .*kai-tuning/ \(available: local, local-unprofiled, scale\)",
    ):
        load_profile(_include(tmp_path), "big")


def test_a_profile_extends_another_object_by_object(tmp_path: Path) -> None:
    small = """
extends: scale
patches:
  - apiVersion: kai.scheduler/v1
    kind: Config
    name: kai-config
    patch:
      spec:
        scheduler: {service: {resources: {requests: {cpu: 500m}}}}
        global: {schedulerName: null}
  - apiVersion: v1
    kind: ConfigMap
    name: extra
    patch: {data: {a: b}}
"""
    profile = load_profile(_include(tmp_path, small=small), "small")
    assert [(p.kind, p.name) for p in profile.patches] == [
        ("SchedulingShard", "default"),
        ("Config", "kai-config"),
        ("ConfigMap", "extra"),
    ]
    spec = profile.patches[1].patch["spec"]
    assert spec["scheduler"]["service"]["resources"] == {
        "requests": {"cpu": "500m", "memory": "7Gi"},
        "limits": {"cpu": "5", "memory": "7Gi"},
    }
    assert spec["global"] == {"schedulerName": None}, "a null still removes the field"
    assert spec["binder"]["maxConcurrentReconciles"] == 100


def test_merge_composes_merge_patches() -> None:
    assert merge({"a": {"b": 1, "c": 2}, "d": [1]}, {"a": {"b": 3}, "d": [2]}) == {
        "a": {"b": 3, "c": 2},
        "d": [2],
    }
    assert merge({"a": {"b": 1}}, {"a": None}) == {"a": None}
    assert merge(None, {"a": 1}) == {"a": 1}


def test_a_request_above_its_limit_is_refused_naming_the_file_and_the_service(tmp_path: Path) -> None:
    """KAI's own setup script shipped such a pair; a profile is checked when it is loaded."""
    text = (INCLUDE / "manifests" / "kai-tuning" / "scale.yaml").read_text()
    bad = text.replace("limits: {cpu: 400m, memory: 2500Mi}", "limits: {cpu: 50m, memory: 2500Mi}")
    assert bad != text
    include = _include(tmp_path, scale=bad)
    expected = r"scale\.yaml: Config kai-config, binder: cpu request 100m is above its limit 50m"
    with pytest.raises(TuningError, match=expected):
        load_profile(include, "scale")
    with pytest.raises(TuningError, match=expected):
        load_profile(include, "local")  # what it extends is broken: named, though local resizes the binder


def test_an_extended_request_above_an_inherited_limit_names_the_extending_file(tmp_path: Path) -> None:
    big = """
extends: scale
patches:
  - {apiVersion: kai.scheduler/v1, kind: Config, name: kai-config,
     patch: {spec: {scheduler: {service: {resources: {requests: {memory: 8Gi}}}}}}}
"""
    with pytest.raises(TuningError, match=r"big\.yaml: Config kai-config, scheduler: memory request 8Gi"):
        load_profile(_include(tmp_path, big=big), "big")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n", r"'\(top level\)' Input should be a valid dictionary"),
        ("extends: scale\n", r"'patches' Field required"),
        ("patches: []\nextend: scale\n", r"'extend' Extra inputs are not permitted"),
        ("extends: [scale]\npatches: []\n", r"'extends' Input should be a valid string"),
        (
            "extends: nothing\npatches: []\n",
            r"extends 'nothing', which is not a profile \(available: bad, local",
        ),
        ("patches: [{kind: Config, name: c, patch: {}}]\n", r"'patches.0.apiVersion' Field required"),
        (
            "patches: [{apiVersion: v1, kind: Config, name: c, patch: []}]\n",
            r"'patches.0.patch' Input should be a valid dictionary",
        ),
        (
            "patches: [{apiVersion: v1, kind: SchedulingShard, name: s, patch: {spec: {args: {a: 0}}}}]\n",
            r"'patches.0' Value error, SchedulingShard s: spec.args values must be strings",
        ),
        (
            "patches: [{apiVersion: v1, kind: Config, name: c, "
            "patch: {spec: {binder: {service: {resources: {limits: {cpu: lots}}}}}}}]\n",
            r"Config c, binder: limits.cpu: 'lots' is not a Kubernetes quantity",
        ),
    ],
)
def test_a_bad_profile_is_refused_naming_the_file_and_the_field(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(TuningError, match=r"tuning profile .*bad\.yaml.*" + message):
        load_profile(_include(tmp_path, bad=text), "bad")


def test_profiles_that_extend_each_other_in_a_circle_are_refused(tmp_path: Path) -> None:
    include = _include(tmp_path, a="extends: b\npatches: []\n", b="extends: a\npatches: []\n")
    with pytest.raises(TuningError, match=r"in a circle: a -> b -> a"):
        load_profile(include, "a")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Decimal("0.1")),
        ("3", Decimal(3)),
        (3, Decimal(3)),
        ("0.5", Decimal("0.5")),
        ("2500Mi", Decimal(2500 * 1024**2)),
        ("7Gi", Decimal(7 * 1024**3)),
        ("1G", Decimal(10**9)),
        ("1E", Decimal(10**18)),
        ("1e3", Decimal(1000)),
        ("12k", Decimal(12000)),
    ],
)
def test_quantities_are_read_as_kubernetes_reads_them(text: object, value: Decimal) -> None:
    assert quantity(text) == value


@pytest.mark.parametrize("text", ["", "lots", "1Qi", "1e", "Mi", True])
def test_a_non_quantity_is_refused(text: object) -> None:
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        quantity(text)
