"""A container's environment as the kubelet computes it: env, envFrom and the downward API."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# (namespace, name) -> the object's data, already decoded; None when the object does not exist.
DataLookup = Callable[[str, str], dict[str, str] | None]

_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


class EnvError(ValueError):
    """The container's environment refers to something that does not exist."""


def _field(pod: dict[str, Any], path: str) -> str:
    metadata, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status") or {}
    simple = {
        "metadata.name": metadata.get("name"),
        "metadata.namespace": metadata.get("namespace"),
        "metadata.uid": metadata.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": status.get("podIP") or "127.0.0.1",
        "status.hostIP": status.get("hostIP") or "127.0.0.1",
    }
    if path in simple:
        return str(simple[path] or "")
    subscript = _SUBSCRIPT.match(path)
    if subscript:
        return str((metadata.get(subscript.group(1)) or {}).get(subscript.group(2), ""))
    raise EnvError(f"fieldRef {path!r} is not supported by the runner node")


def resolve(
    *,
    pod: dict[str, Any],
    container: dict[str, Any],
    secrets: DataLookup,
    config_maps: DataLookup,
) -> dict[str, str]:
    """The variables the container's process gets, in the kubelet's order (envFrom, then env)."""
    namespace = pod["metadata"]["namespace"]
    result: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix") or ""
        for kind, lookup in (("secretRef", secrets), ("configMapRef", config_maps)):
            ref = source.get(kind)
            if ref is None:
                continue
            data = lookup(namespace, ref["name"])
            if data is None and not ref.get("optional"):
                raise EnvError(f"envFrom {kind} {namespace}/{ref['name']} not found")
            result.update({f"{prefix}{key}": value for key, value in (data or {}).items()})
    for variable in container.get("env") or []:
        result[variable["name"]] = _value(
            variable=variable,
            pod=pod,
            namespace=namespace,
            secrets=secrets,
            config_maps=config_maps,
            earlier=result,
        )
    return result


def _value(
    *,
    variable: dict[str, Any],
    pod: dict[str, Any],
    namespace: str,
    secrets: DataLookup,
    config_maps: DataLookup,
    earlier: dict[str, str],
) -> str:
    if "valueFrom" not in variable or variable["valueFrom"] is None:
        # $(VAR) refers to variables defined earlier, as in Kubernetes; $$ escapes a dollar.
        return re.sub(
            r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
            lambda m: "$" if m.group(0) == "$$" else earlier.get(m.group(1), m.group(0)),
            variable.get("value") or "",
        )
    source = variable["valueFrom"]
    if source.get("fieldRef"):
        return _field(pod, source["fieldRef"]["fieldPath"])
    for kind, lookup in (("secretKeyRef", secrets), ("configMapKeyRef", config_maps)):
        ref = source.get(kind)
        if ref is None:
            continue
        value = (lookup(namespace, ref["name"]) or {}).get(ref["key"])
        if value is None:
            if ref.get("optional"):
                return ""
            raise EnvError(
                f"env {variable['name']}: {kind} {namespace}/{ref['name']}[{ref['key']}] not found"
            )
        return value
    raise EnvError(f"env {variable['name']}: valueFrom {sorted(source)} is not supported by the runner node")
