"""What KAI's Deployments show once KAI's operator has rolled a tuning profile out, and what they lack. Pure.

The profile patches KAI's Config and SchedulingShards; the operator renders those into Deployments.
How it does, in KAI's source (``pkg/operator/operands``, ``pkg/apis/kai/v1``):

- each service's Deployment and its one container carry the same name, with the service's
  ``service.resources`` as the container's resources and its ``replicas`` as the Deployment's
  (``common/common.go``, DeploymentForKAIConfig); requests and limits the Config leaves out get KAI's
  defaults (``pkg/apis/kai/v1/<service>/``), so only those the profile sets are compared;
- the names: ``binder`` (``binder/resources.go``), ``admission`` (``admission/resources.go``),
  ``pod-grouper`` (``pod_grouper/resources.go``), ``queue-controller`` (``queue_controller/resources.go``),
  ``podgroup-controller`` (``pod_group_controller/resources.go``); the scheduler runs one Deployment per
  SchedulingShard, ``<spec.global.schedulerName>-<shard>`` with the Config's scheduler resources
  (``scheduler/resources_for_shard.go``, DeploymentName);
- the binder's ``maxConcurrentReconciles`` becomes its arg ``--max-concurrent-reconciles=<n>``
  (``binder/resources.go``, buildArgsList);
- a shard's ``args`` become ``--<flag>=<value>``, only for flags the scheduler knows
  (``scheduler/resources_for_shard.go``, buildArgsList): a misspelt flag never shows up;
- everything lands in the Config's ``spec.namespace``; it and ``spec.global.schedulerName`` default to
  ``kai-scheduler`` (``config_types.go``, ``global.go``, ``pkg/common/constants``).

A rollout is finished as ``kubectl rollout status`` judges it: the Deployment controller observed the
latest generation, every replica runs the new template, no old one is left and all are available.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from kai_scale.cluster.kai_tuning import TuningPatch, merge, quantity
from kai_scale_model import kai

# Config spec keys of the services with one Deployment each, and that Deployment's name.
SERVICE_DEPLOYMENTS = {
    "admission": "admission",
    "binder": "binder",
    "podGroupController": "podgroup-controller",
    "podGrouper": "pod-grouper",
    "queueController": "queue-controller",
}
_CHECKED_SERVICES = {*SERVICE_DEPLOYMENTS, "scheduler"}

# A resource quantity as the API serves it ("500m", "2Gi") or a profile sets it (also 3, 0.5).
Quantity = str | int | float


class _ApiView(BaseModel):
    """Part of an object as the API serves it (JSON field names): the fields read here, the rest ignored.

    The API server leaves empty and zero fields out rather than serving nulls: a left-out field takes
    its default here, a null is an error.
    """

    model_config = ConfigDict(extra="ignore", frozen=True, alias_generator=to_camel)


class ContainerResources(_ApiView):
    """A container's requests and limits."""

    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}


class Container(_ApiView):
    """A container of a Deployment's pod template."""

    name: str
    args: tuple[str, ...] = ()
    resources: ContainerResources = ContainerResources()


class _PodSpec(_ApiView):
    containers: tuple[Container, ...] = ()


class _PodTemplate(_ApiView):
    spec: _PodSpec = _PodSpec()


class _DeploymentSpec(_ApiView):
    replicas: int = 1  # the API's default
    template: _PodTemplate = _PodTemplate()


class _DeploymentStatus(_ApiView):
    # The API server leaves zero counts out.
    observed_generation: int = 0
    replicas: int = 0
    updated_replicas: int = 0
    available_replicas: int = 0


class _Metadata(_ApiView):
    name: str
    generation: int = 0


class Deployment(_ApiView):
    """A Deployment as the API serves it: what its rollout is judged by."""

    metadata: _Metadata
    spec: _DeploymentSpec = _DeploymentSpec()
    status: _DeploymentStatus = _DeploymentStatus()


class _Global(_ApiView):
    scheduler_name: str | None = None


class _ConfigSpec(_ApiView):
    namespace: str | None = None
    global_: _Global = Field(default=_Global(), alias="global")


class KaiConfig(_ApiView):
    """KAI's Config object as the API serves it: where its operator puts KAI's services."""

    spec: _ConfigSpec = _ConfigSpec()


@dataclass(frozen=True, kw_only=True)
class ExpectedDeployment:
    """One of KAI's Deployments as the profile makes it."""

    name: str
    """The Deployment, and its container (KAI names both alike)."""
    resources: dict[str, dict[str, Any]]
    """The container's ``requests`` and ``limits`` the profile sets (the rest are KAI's defaults)."""
    args: tuple[str, ...]
    """Args the container must carry, each ``--flag=value``."""
    replicas: int | None
    """The Deployment's replicas, where the profile sets them."""


def operand_names(config: KaiConfig | None) -> tuple[str, str]:
    """The namespace of KAI's services and its scheduler name, as KAI's Config object sets them."""
    spec = config.spec if config is not None else _ConfigSpec()
    return spec.namespace or kai.NAMESPACE, spec.global_.scheduler_name or kai.SCHEDULER_NAME


def _config_spec(patches: Sequence[TuningPatch]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for patch in patches:
        if patch.kind == "Config":
            spec = merge(spec, patch.patch.get("spec") or {})
    return spec


def _set(values: Mapping[str, Any] | None) -> dict[str, Any]:
    """The values a merge patch sets (a null removes a field: nothing to expect there)."""
    return {key: value for key, value in (values or {}).items() if value is not None}


def _expected(name: str, settings: Mapping[str, Any], args: Sequence[str]) -> ExpectedDeployment:
    resources = ((settings.get("service") or {}).get("resources")) or {}
    replicas = settings.get("replicas")
    return ExpectedDeployment(
        name=name,
        resources={kind: _set(resources.get(kind)) for kind in ("requests", "limits") if resources.get(kind)},
        args=tuple(args),
        replicas=int(replicas) if replicas is not None else None,
    )


def expected_deployments(patches: Sequence[TuningPatch], *, scheduler_name: str) -> list[ExpectedDeployment]:
    """The Deployments the profile's patches change, as the operator should render them, by name."""
    spec = _config_spec(patches)
    expected = []
    for service, name in SERVICE_DEPLOYMENTS.items():
        if isinstance(spec.get(service), dict):
            reconciles = spec[service].get("maxConcurrentReconciles") if service == "binder" else None
            args = () if reconciles is None else (f"--max-concurrent-reconciles={reconciles}",)
            expected.append(_expected(name, spec[service], args))
    shards = {
        patch.name: _set((patch.patch.get("spec") or {}).get("args"))
        for patch in patches
        if patch.kind == "SchedulingShard"
    }
    if isinstance(spec.get("scheduler"), dict) and not shards:
        shards = {kai.DEFAULT_SHARD: {}}
    for shard, flags in shards.items():
        shard_args = [f"--{flag}={value}" for flag, value in sorted(flags.items())]
        expected.append(_expected(f"{scheduler_name}-{shard}", spec.get("scheduler") or {}, shard_args))
    return sorted(expected, key=lambda e: e.name)


def _leaves(value: Any, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            yield from _leaves(inner, (*path, str(key)))
    else:
        yield path


def _checked(kind: str, path: tuple[str, ...]) -> bool:
    if kind == "SchedulingShard":
        return path[:2] == ("spec", "args") and len(path) == 3
    if kind != "Config" or len(path) < 3 or path[0] != "spec" or path[1] not in _CHECKED_SERVICES:
        return False
    rest = path[2:]
    return (
        rest == ("replicas",)
        or (path[1] == "binder" and rest == ("maxConcurrentReconciles",))
        or (rest[:2] == ("service", "resources") and len(rest) == 4 and rest[2] in ("requests", "limits"))
    )


def unchecked_fields(patches: Sequence[TuningPatch]) -> list[str]:
    """Fields the profile sets that are not compared with a Deployment, as ``Config kai-config spec.x``."""
    return [
        f"{patch.kind} {patch.name} {'.'.join(path)}"
        for patch in patches
        for path in _leaves(patch.patch, ())
        if not _checked(patch.kind, path)
    ]


def _same_quantity(seen: Quantity, want: Quantity) -> bool:
    try:
        return quantity(seen) == quantity(want)
    except ValueError:
        return False


def _container_problems(expected: ExpectedDeployment, container: Container) -> list[str]:
    where = f"deployment {expected.name}, container {expected.name}"
    problems = []
    for kind, wanted in sorted(expected.resources.items()):
        for resource, want in sorted(wanted.items()):
            seen = getattr(container.resources, kind).get(resource)
            if seen is None or not _same_quantity(seen, want):
                problems.append(f"{where}: {kind}.{resource} expected {want}, seen {seen or 'none'}")
    for want in expected.args:
        if want not in container.args:
            flag = want.partition("=")[0]
            seen_args = [arg for arg in container.args if arg.partition("=")[0] == flag]
            problems.append(f"{where}: arg {want} expected, seen {', '.join(seen_args) or 'none'}")
    return problems


def _unfinished(name: str, deployment: Deployment) -> list[str]:
    """Why the rollout is not finished yet, as ``kubectl rollout status`` says it (empty: finished)."""
    generation, status = deployment.metadata.generation, deployment.status
    observed = status.observed_generation
    if observed < generation:
        return [f"deployment {name}: generation {generation} not yet observed (observed {observed})"]
    replicas = deployment.spec.replicas
    updated, current, available = status.updated_replicas, status.replicas, status.available_replicas
    if updated < replicas:
        return [f"deployment {name}: {updated} of {replicas} replicas updated"]
    if current > updated:
        return [f"deployment {name}: {current - updated} old replicas pending termination"]
    if available < updated:
        return [f"deployment {name}: {available} of {updated} updated replicas available"]
    return []


def rollout_problems(expected: ExpectedDeployment, deployment: Deployment | None) -> list[str]:
    """What keeps ``deployment`` from being ``expected`` and rolled out, expected vs seen (empty: done)."""
    if deployment is None:
        return [
            f"deployment {expected.name}: not found (KAI's operator has not made it, or the service is "
            "switched off in the Config: service.enabled false)"
        ]
    containers = deployment.spec.template.spec.containers
    container = next((c for c in containers if c.name == expected.name), None)
    if container is None:
        names = ", ".join(c.name for c in containers) or "none"
        problems = [f"deployment {expected.name}: no container {expected.name} (seen: {names})"]
    else:
        problems = _container_problems(expected, container)
    replicas = deployment.spec.replicas
    if expected.replicas is not None and replicas != expected.replicas:
        problems.append(f"deployment {expected.name}: replicas expected {expected.replicas}, seen {replicas}")
    return problems + _unfinished(expected.name, deployment)
