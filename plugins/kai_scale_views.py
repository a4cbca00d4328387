"""The pipeline's Airflow plugin: the trend view ("Scale tests") and the check of the nightly DAG's triggers.

The view shows the published results in Airflow's UI; the check makes the API server refuse a trigger
whose conf has a key the DAG does not know. Airflow's plugin manager imports every ``.py`` under
``plugins/`` as a top-level module named after its file, so this folder holds only this module; both
live in the installed ``kai_scale`` provider (``kai_scale.views``, ``kai_scale.trigger_guard``).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from kai_scale import trigger_guard
from kai_scale.alerts import deadline_clear
from kai_scale.views.plugin import fastapi_app, nav_entry

# An Airflow with apache/airflow#70368 refuses the clear of a run whose overdue alert is still pending
# (kai_scale.alerts.deadline_clear); the api-server, which serves the UI's Clear, loads this plugin.
deadline_clear.install()

# The nightly DAG's id (dags/kai_scale_nightly.py): the view links to its runs, and shows the published
# results to whoever may read them; its triggers are checked for unknown keys.
NIGHTLY_DAG_ID = "kai_scale_nightly"


class KaiScaleViewsPlugin(AirflowPlugin):
    """The trend view (its FastAPI app and its entry in Airflow's nav) and the trigger check."""

    name = "kai_scale_views"
    # AirflowPlugin's interface: class attributes, read by the plugin manager.
    fastapi_apps = [fastapi_app(dag_id=NIGHTLY_DAG_ID)]  # noqa: RUF012
    external_views = [nav_entry()]  # noqa: RUF012
    fastapi_root_middlewares = [trigger_guard.middleware_entry(dag_id=NIGHTLY_DAG_ID)]  # noqa: RUF012
