"""Where the setup fetches what it installs: upstream, or a mirror the deployment names.

An air-gapped cluster (or the local environment) cannot reach the publishers of the charts and
release manifests that include/manifests/installs.yaml pins. ``KAI_SCALE_SOURCE_MIRRORS`` maps
upstream prefixes to mirrors, e.g.::

    [{"upstream": "oci://ghcr.io/", "mirror": "oci://registry.internal/ghcr.io/"},
     {"upstream": "https://github.com/", "mirror": "https://artifacts.internal/github.com/"}]

The longest matching prefix wins; a reference no rule matches is fetched upstream. ``plain_http``
marks an OCI mirror served over plain HTTP (helm's ``--plain-http``). A mirror may be a ``file://``
URL for manifests mounted on the worker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import Field, TypeAdapter, ValidationError

from kai_scale_model.validation import StrictModel

SOURCE_MIRRORS_VARIABLE = "KAI_SCALE_SOURCE_MIRRORS"
_SCHEMES = ("oci://", "https://", "http://", "file://")


class SourceMirrorsError(ValueError):
    """The mirror setting cannot be used; the message names the variable and what is wrong."""


class Mirror(StrictModel):
    """One rule: references starting with ``upstream`` are fetched from ``mirror`` instead."""

    upstream: str = Field(min_length=1)
    mirror: str = Field(min_length=1)
    plain_http: bool = False


@dataclass(frozen=True)
class Source:
    """Where one chart or manifest is fetched from."""

    reference: str
    plain_http: bool = False


@dataclass(frozen=True)
class Sources:
    """The deployment's mirror rules (none: everything upstream)."""

    mirrors: tuple[Mirror, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> Sources:
        """Read ``KAI_SCALE_SOURCE_MIRRORS`` (a JSON list of rules); empty or unset: no mirrors."""
        if not text or not text.strip():
            return cls()
        try:
            mirrors = TypeAdapter(tuple[Mirror, ...]).validate_python(json.loads(text))
        except (json.JSONDecodeError, ValidationError) as error:
            raise SourceMirrorsError(
                f"{SOURCE_MIRRORS_VARIABLE} must be a JSON list of "
                '{"upstream": <prefix>, "mirror": <prefix>, "plain_http": <bool, optional>}: '
                f"{error}"
            ) from None
        for mirror in mirrors:
            for prefix in (mirror.upstream, mirror.mirror):
                if not prefix.startswith(_SCHEMES):
                    raise SourceMirrorsError(
                        f"{SOURCE_MIRRORS_VARIABLE}: {prefix!r} must start with one of {', '.join(_SCHEMES)}"
                    )
            if mirror.upstream.startswith("oci://") != mirror.mirror.startswith("oci://"):
                raise SourceMirrorsError(
                    f"{SOURCE_MIRRORS_VARIABLE}: an OCI reference can only be mirrored by another "
                    f"(upstream {mirror.upstream!r}, mirror {mirror.mirror!r})"
                )
        upstreams = [mirror.upstream for mirror in mirrors]
        if len(set(upstreams)) != len(upstreams):
            raise SourceMirrorsError(f"{SOURCE_MIRRORS_VARIABLE} names an upstream prefix twice")
        return cls(mirrors)

    def resolve(self, reference: str) -> Source:
        """Where to fetch ``reference`` from: its longest-prefix mirror, else itself."""
        matching = [m for m in self.mirrors if reference.startswith(m.upstream)]
        if not matching:
            return Source(reference)
        rule = max(matching, key=lambda m: len(m.upstream))
        return Source(rule.mirror + reference[len(rule.upstream) :], plain_http=rule.plain_http)
