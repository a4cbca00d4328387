"""KAI's tuning profiles (``include/manifests/kai-tuning/<profile>.yaml``): loaded, resolved, checked. Pure.

A profile is a list of merge patches of KAI's own objects (its SchedulingShard and its Config), which
KAI's operator turns into its services' Deployments. A profile may extend another: its patches are
merged over the other's, object by object, as JSON merge patches compose, so that a profile that only
resizes (``local``) names the sizes and nothing else. A deployment picks one by name
(``KAI_SCALE_KAI_TUNING_PROFILE``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, model_validator

from kai_scale_model.validation import StrictModel, validated

TUNING_DIR = Path("manifests") / "kai-tuning"
DEFAULT_PROFILE = "scale"
# A Kubernetes quantity: a number, then a binary or decimal suffix or a decimal exponent.
_QUANTITY = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE])?")
_BINARY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL_POWERS = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SUFFIXES = {
    **{suffix: Decimal(1024) ** power for power, suffix in enumerate(_BINARY_SUFFIXES, 1)},
    **{suffix: Decimal(10) ** power for suffix, power in _DECIMAL_POWERS.items()},
}


class TuningError(ValueError):
    """A tuning profile the pipeline cannot use; the message names the file and the field."""


class TuningPatch(StrictModel):
    """A JSON merge patch of one of KAI's objects."""

    api_version: str = Field(alias="apiVersion", description="the object's apiVersion")
    kind: str = Field(description="the object's kind: ``SchedulingShard``, ``Config``")
    name: str = Field(description="the object's name")
    patch: dict[str, Any] = Field(description="the merge patch, in the object's own schema (KAI's)")

    @model_validator(mode="after")
    def _shard_args_are_strings(self) -> TuningPatch:
        args = (self.patch.get("spec") or {}).get("args") or {}
        if self.kind == "SchedulingShard" and not all(isinstance(v, str) for v in args.values()):
            # The CRD's args are strings; a bare 0 would be refused by the API server at patch time.
            raise ValueError(f"SchedulingShard {self.name}: spec.args values must be strings")
        return self

    @property
    def target(self) -> tuple[str, str, str]:
        """The object it patches: apiVersion, kind and name."""
        return (self.api_version, self.kind, self.name)


class TuningFile(StrictModel):
    """A tuning profile's file, as written."""

    extends: str | None = Field(default=None, description="the profile whose patches this one's go over")
    patches: tuple[TuningPatch, ...] = Field(description="merge patches, one or more per object")


@dataclass(frozen=True, kw_only=True)
class TuningProfile:
    """One tuning profile, resolved: its own patches merged over those of the profile it extends."""

    name: str
    """Its name: the file's stem."""
    path: Path
    """Its file."""
    patches: tuple[TuningPatch, ...]
    """Merge patches, one per object."""


def profile_names(include_dir: Path) -> list[str]:
    """The profiles in ``include/manifests/kai-tuning/``, by name (empty when there is none)."""
    return sorted(path.stem for path in (include_dir / TUNING_DIR).glob("*.yaml"))


def quantity(value: object) -> Decimal:
    """A Kubernetes quantity (``100m``, ``2500Mi``, ``3``, ``1e3``) as a number; ValueError if it is none."""
    match = _QUANTITY.fullmatch(str(value).strip())
    if isinstance(value, bool) or match is None:
        raise ValueError(f"{value!r} is not a Kubernetes quantity like 100m, 2500Mi or 3")
    number, suffix = match.groups()
    try:
        if suffix and suffix[0] in "eE" and len(suffix) > 1:
            return Decimal(number) * Decimal(10) ** int(suffix[1:])
        return Decimal(number) * _SUFFIXES.get(suffix or "", Decimal(1))
    except InvalidOperation as error:
        raise ValueError(f"{value!r} is not a Kubernetes quantity like 100m, 2500Mi or 3") from error


def load_profile(include_dir: Path, name: str) -> TuningProfile:
    """The profile ``name``, resolved and checked; TuningError names the file and the field."""
    return _load(include_dir, name, seen=())


def _load(include_dir: Path, name: str, *, seen: tuple[str, ...]) -> TuningProfile:
    available = profile_names(include_dir)
    if name not in available:
        raise TuningError(
            f"no tuning profile {name!r} in {include_dir / TUNING_DIR}/ "
            f"(available: {', '.join(available) or 'none'})"
        )
    if name in seen:
        raise TuningError(f"tuning profiles extend each other in a circle: {' -> '.join((*seen, name))}")
    path = include_dir / TUNING_DIR / f"{name}.yaml"
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise TuningError(f"tuning profile {path}: not valid YAML: {error}") from error
    tuning = validated(TuningFile, document, what=f"tuning profile {path}", error=TuningError)
    base = tuning.extends
    if base is not None and base not in available:
        raise TuningError(
            f"tuning profile {path}: extends {base!r}, which is not a profile "
            f"(available: {', '.join(available)})"
        )
    patches = (
        _merged(_load(include_dir, base, seen=(*seen, name)).patches, tuning.patches)
        if base
        else tuning.patches
    )
    for patch in patches:
        _check_requests_within_limits(path, patch)
    return TuningProfile(name=name, path=path, patches=patches)


def _merged(base: tuple[TuningPatch, ...], own: tuple[TuningPatch, ...]) -> tuple[TuningPatch, ...]:
    """``own`` over ``base``, object by object: one patch per object, in the order first named."""
    result = {patch.target: patch for patch in base}
    for patch in own:
        earlier = result.get(patch.target)
        result[patch.target] = (
            patch.model_copy(update={"patch": merge(earlier.patch, patch.patch)}) if earlier else patch
        )
    return tuple(result.values())


def merge(base: Any, overlay: Any) -> Any:
    """Two JSON merge patches as one (RFC 7386): mappings merge key by key, anything else replaces.

    A null in ``overlay`` stays null, so the composed patch still removes that field.
    """
    if not isinstance(base, dict) or not isinstance(overlay, dict):
        return overlay
    return {**base, **{key: merge(base.get(key), value) for key, value in overlay.items()}}


def _check_requests_within_limits(path: Path, patch: TuningPatch) -> None:
    """A request above its limit: Kubernetes refuses the pods, and KAI's operator leaves the service down."""
    for service, settings in (patch.patch.get("spec") or {}).items():
        if not isinstance(settings, dict):
            continue
        resources = (settings.get("service") or {}).get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        where = f"tuning profile {path}: {patch.kind} {patch.name}, {service}"
        for kind, values in (("requests", requests), ("limits", limits)):
            for resource, value in values.items():
                try:
                    quantity(value)
                except ValueError as error:
                    raise TuningError(f"{where}: {kind}.{resource}: {error}") from None
        problems = [
            f"{resource} request {requests[resource]} is above its limit {limits[resource]}"
            for resource in sorted(set(requests) & set(limits))
            if quantity(requests[resource]) > quantity(limits[resource])
        ]
        if problems:
            raise TuningError(f"{where}: {'; '.join(problems)}; a request may not exceed its limit")
