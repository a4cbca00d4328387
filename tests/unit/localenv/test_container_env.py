from __future__ import annotations

from typing import Any

import pytest

from localenv.runner_kubelet.container_env import EnvError, resolve

POD: dict[str, Any] = {
    "metadata": {"name": "runner-1", "namespace": "kai", "uid": "u-1", "labels": {"scenario": "reclaim"}},
    "spec": {"nodeName": "kai-runner", "serviceAccountName": "runner"},
}
SECRETS = {("kai", "creds"): {"token": "s3cret"}}
CONFIG_MAPS = {("kai", "settings"): {"MODE": "fast", "LEVEL": "3"}}


def _resolve(container: dict[str, Any]) -> dict[str, str]:
    return resolve(
        pod=POD,
        container=container,
        secrets=lambda ns, name: SECRETS.get((ns, name)),
        config_maps=lambda ns, name: CONFIG_MAPS.get((ns, name)),
    )


def test_values_refs_and_downward_api() -> None:
    env = _resolve(
        {
            "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
            "env": [
                {"name": "NODE_COUNT", "value": "500"},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "SCENARIO", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['scenario']"}}},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
                {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "MODE"}}},
                {"name": "GREETING", "value": "$(POD) on $(NODE_COUNT) nodes costs $$5 $(UNKNOWN)"},
            ],
        }
    )
    assert env == {
        "CFG_MODE": "fast",
        "CFG_LEVEL": "3",
        "NODE_COUNT": "500",
        "POD": "runner-1",
        "SCENARIO": "reclaim",
        "TOKEN": "s3cret",
        "MODE": "fast",
        "GREETING": "runner-1 on 500 nodes costs $5 $(UNKNOWN)",
    }


def test_missing_secret_key_is_an_error_unless_optional() -> None:
    missing = {"name": "X", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "nope"}}}
    with pytest.raises(EnvError, match=r"secretKeyRef kai/creds\[nope\] not found"):
        _resolve({"env": [missing]})
    missing["valueFrom"]["secretKeyRef"]["optional"] = True  # type: ignore[index]
    assert _resolve({"env": [missing]}) == {"X": ""}


def test_unsupported_field_ref_is_named() -> None:
    with pytest.raises(EnvError, match=r"fieldRef 'spec.hostname' is not supported"):
        _resolve({"env": [{"name": "H", "valueFrom": {"fieldRef": {"fieldPath": "spec.hostname"}}}]})
