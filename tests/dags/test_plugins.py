"""Airflow's plugin manager on this repository's plugins/: only the plugin's own module is imported."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from airflow.dag_processing.dagbag import DagBag

from tests.conftest import REPO

# Run in a fresh interpreter: the plugin manager loads once per process, and the test must see the
# modules it adds to sys.modules, nothing else.
LOAD_PLUGINS = """
import json, sys
WEB_APP_MODULES = ("kai_scale.views.app", "airflow.api_fastapi.core_api.security")
from pathlib import Path
from airflow import plugins_manager
plugins_manager.ensure_plugins_loaded()
folder = Path(sys.argv[1]).resolve()
top_level = {
    name: Path(module.__file__).resolve()
    for name, module in list(sys.modules.items())
    if "." not in name and getattr(module, "__file__", None)
}
plugins = plugins_manager._get_plugins()[0]
print(json.dumps({
    "from_folder": sorted(name for name, path in top_level.items() if path.is_relative_to(folder)),
    "plugins": sorted(plugin.name for plugin in plugins),
    "fastapi_apps": [app["url_prefix"] for plugin in plugins for app in plugin.fastapi_apps],
    "external_views": [view for plugin in plugins for view in plugin.external_views],
    "middlewares": [
        [entry["middleware"].__module__, entry["kwargs"]]
        for plugin in plugins for entry in plugin.fastapi_root_middlewares
    ],
    "clear_moves_deadlines_with": __import__(
        "airflow.models.taskinstance", fromlist=["_"]
    )._recalculate_dagrun_queued_at_deadlines.__module__,
    "web_modules": sorted(
        name for name in sys.modules
        if name.split(".")[0] in ("fastapi", "starlette") or name in WEB_APP_MODULES
    ),
}))
"""


def _load_plugins(folder: Path) -> dict[str, Any]:
    env = {**os.environ, "AIRFLOW__CORE__PLUGINS_FOLDER": str(folder)}
    result = subprocess.run(
        [sys.executable, "-c", LOAD_PLUGINS, str(folder)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    loaded: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return loaded


def test_only_the_plugin_module_is_imported_from_plugins() -> None:
    loaded = _load_plugins(REPO / "plugins")
    assert loaded["from_folder"] == ["kai_scale_views"]
    assert "kai_scale_views" in loaded["plugins"]


def test_the_plugin_adds_the_trend_view_and_its_nav_entry_without_loading_the_web_app() -> None:
    """Each task and the scheduler import the plugin too, but only the api-server serves the view.

    So FastAPI and Airflow's API security wait for the view's first request.
    """
    loaded = _load_plugins(REPO / "plugins")
    assert loaded["fastapi_apps"] == ["/scale-tests"]
    assert [(view["name"], view["url_route"], view["href"]) for view in loaded["external_views"]] == [
        ("Scale tests", "scale-tests", "scale-tests/runs")
    ]
    assert loaded["web_modules"] == []


def test_the_plugin_checks_the_nightly_dags_triggers() -> None:
    loaded = _load_plugins(REPO / "plugins")
    assert loaded["middlewares"] == [["kai_scale.trigger_guard", {"dag_id": "kai_scale_nightly"}]]


def test_the_plugin_puts_its_move_of_a_cleared_runs_deadlines_in_airflows_place() -> None:
    """The clear of a run with a pending overdue alert fails without it (kai_scale.alerts.deadline_clear)."""
    loaded = _load_plugins(REPO / "plugins")
    assert loaded["clear_moves_deadlines_with"] == "kai_scale.alerts.deadline_clear"


def test_the_view_links_to_and_authorizes_by_the_dag_of_the_dags_folder() -> None:
    spec = importlib.util.spec_from_file_location("kai_scale_views", REPO / "plugins" / "kai_scale_views.py")
    assert spec is not None
    assert spec.loader is not None
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    assert plugin.NIGHTLY_DAG_ID in DagBag(dag_folder=str(REPO / "dags")).dags


@pytest.mark.parametrize("stray", ["profile", "json"])
def test_a_stray_module_in_plugins_would_be_caught(tmp_path: Path, stray: str) -> None:
    """The check above sees what the plugin manager imports, also a name Python had loaded already."""
    shutil.copytree(REPO / "plugins", tmp_path / "plugins")
    (tmp_path / "plugins" / f"{stray}.py").write_text("SHADOWS_THE_STANDARD_LIBRARY = True\n")
    loaded = _load_plugins(tmp_path / "plugins")
    assert stray in loaded["from_folder"]
