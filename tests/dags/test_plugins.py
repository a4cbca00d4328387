"""Airflow's plugin manager on this repository's plugins/: only the plugin's own module is imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

# Run in a fresh interpreter: the plugin manager loads once per process, and the test must see the
# modules it adds to sys.modules, nothing else.
LOAD_PLUGINS = """
import json, sys
from pathlib import Path
from airflow import plugins_manager
plugins_manager.ensure_plugins_loaded()
folder = Path(sys.argv[1]).resolve()
top_level = {
    name: Path(module.__file__).resolve()
    for name, module in list(sys.modules.items())
    if "." not in name and getattr(module, "__file__", None)
}
print(json.dumps({
    "from_folder": sorted(name for name, path in top_level.items() if path.is_relative_to(folder)),
    "plugins": sorted(plugin.name for plugin in plugins_manager._get_plugins()[0]),
}))
"""


def _load_plugins(folder: Path) -> dict[str, list[str]]:
    env = {**os.environ, "AIRFLOW__CORE__PLUGINS_FOLDER": str(folder)}
    result = subprocess.run(
        [sys.executable, "-c", LOAD_PLUGINS, str(folder)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    loaded: dict[str, list[str]] = json.loads(result.stdout.strip().splitlines()[-1])
    return loaded


def test_only_the_plugin_module_is_imported_from_plugins() -> None:
    loaded = _load_plugins(REPO / "plugins")
    assert loaded["from_folder"] == ["kai_scale_views"]
    assert "kai_scale_views" in loaded["plugins"]


@pytest.mark.parametrize("stray", ["profile", "json"])
def test_a_stray_module_in_plugins_would_be_caught(tmp_path: Path, stray: str) -> None:
    """The check above sees what the plugin manager imports, also a name Python had loaded already."""
    shutil.copytree(REPO / "plugins", tmp_path / "plugins")
    (tmp_path / "plugins" / f"{stray}.py").write_text("SHADOWS_THE_STANDARD_LIBRARY = True\n")
    loaded = _load_plugins(tmp_path / "plugins")
    assert stray in loaded["from_folder"]
