"""Airflow's plugin manager on this repository's plugins/: only the plugin's own module is imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

# Run in a fresh interpreter: the plugin manager loads once per process, and the test must see the
# modules it adds to sys.modules, nothing else.
LOAD_PLUGINS = """
import json, sys
before = set(sys.modules)
from airflow import plugins_manager
plugins_manager.ensure_plugins_loaded()
folder = sys.argv[1]
loaded = {
    name: getattr(module, "__file__", None) or ""
    for name, module in sys.modules.items()
    if name not in before and "." not in name
}
print(json.dumps({
    "from_folder": sorted(name for name, path in loaded.items() if path.startswith(folder)),
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


def test_a_stray_module_in_plugins_would_be_caught(tmp_path: Path) -> None:
    """The check above sees what the plugin manager imports: a file named like a stdlib module is."""
    shutil.copytree(REPO / "plugins", tmp_path / "plugins")
    (tmp_path / "plugins" / "profile.py").write_text("SHADOWS_THE_STANDARD_LIBRARY = True\n")
    loaded = _load_plugins(tmp_path / "plugins")
    assert "profile" in loaded["from_folder"]
