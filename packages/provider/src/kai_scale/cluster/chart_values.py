"""Chart values profiles (``include/manifests/chart-values/<profile>.yaml``): loaded and checked. Pure.

A deployment's own values for the charts the setup installs, by release, in helm's ``--set`` form
(``grafana.enabled: false``). They are set over the values of include/manifests/installs.yaml, which
are the setup's and the same everywhere. A release the deployment cannot run at all is turned off
whole (``pyroscope: false``), where the setup can do without it. A deployment picks one by name
(``KAI_SCALE_CHART_VALUES_PROFILE``); ``default`` changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

VALUES_DIR = Path("manifests") / "chart-values"
DEFAULT_PROFILE = "default"
PROFILE_VARIABLE = "KAI_SCALE_CHART_VALUES_PROFILE"
_SET_SYNTAX = (",", "[", "]", "\\", "{", "}")


class ChartValuesError(ValueError):
    """A values profile the pipeline cannot use; the message names the file and the value."""


@dataclass(frozen=True, kw_only=True)
class Profile:
    """A chart values profile, checked."""

    name: str
    """Its name: the file's stem."""
    values: dict[str, dict[str, str]]
    """``--set`` values by release, as strings (helm parses them)."""
    turned_off: frozenset[str]
    """Releases the deployment does not install (``<release>: false``)."""


def profile_names(include_dir: Path) -> list[str]:
    """The profiles in ``include/manifests/chart-values/``, by name (empty when there is none)."""
    return sorted(path.stem for path in (include_dir / VALUES_DIR).glob("*.yaml"))


def load_profile(
    include_dir: Path, name: str, *, releases: set[str], optional: frozenset[str] = frozenset()
) -> Profile:
    """The profile ``name``.

    :param releases: the releases installs.yaml declares; a profile naming another is refused.
    :param optional: the releases the setup can do without, the only ones a profile may turn off.
    """
    path = include_dir / VALUES_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ChartValuesError(
            f"no chart values profile {name!r} in {include_dir / VALUES_DIR}/ "
            f"(available: {', '.join(profile_names(include_dir)) or 'none'})"
        )
    try:
        document: object = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ChartValuesError(f"{path} is not YAML: {error}") from None
    if document is None:  # a file of comments only
        document = {}
    if not isinstance(document, dict):
        raise ChartValuesError(
            f"{path} must map release names to their values, got {type(document).__name__}"
        )
    profile: dict[str, dict[str, str]] = {}
    turned_off: set[str] = set()
    for release, values in document.items():
        if release not in releases:
            raise ChartValuesError(
                f"{path}: {release!r} is no release of installs.yaml ({', '.join(sorted(releases))})"
            )
        if values is False:
            if release not in optional:
                raise ChartValuesError(
                    f"{path}: {release} cannot be turned off: the setup needs it (only "
                    f"{', '.join(sorted(optional)) or 'none'} can be)"
                )
            turned_off.add(release)
            continue
        if not isinstance(values, dict) or not values:
            raise ChartValuesError(
                f"{path}: {release} must map --set keys to values, or be false to turn it off"
            )
        for key, value in values.items():
            if isinstance(value, (dict, list)) or value is None:
                raise ChartValuesError(
                    f"{path}: {release}.{key} must be a single value (helm's --set form), got {value!r}"
                )
            # --set splits at commas and reads brackets as list indexes: such a value or key would
            # reach the chart as something else.
            if any(character in f"{key}{value}" for character in _SET_SYNTAX):
                raise ChartValuesError(
                    f"{path}: {release}.{key}: {value!r} has one of {' '.join(_SET_SYNTAX)}, which helm's "
                    "--set would not pass on as written"
                )
        profile[release] = {str(key): _as_set_value(value) for key, value in values.items()}
    return Profile(name=name, values=profile, turned_off=frozenset(turned_off))


def _as_set_value(value: object) -> str:
    """How ``--set`` spells a YAML scalar: booleans in lower case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
