"""The pipeline's Airflow plugin: "Scale tests" in Airflow's UI, the trend view of the published results.

Airflow's plugin manager imports every ``.py`` under ``plugins/`` as a top-level module named after its
file, so this folder holds only this module; the view lives in the installed ``kai_scale`` provider
(``kai_scale.views``).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from kai_scale.views.plugin import fastapi_app, nav_entry

# The nightly DAG's id (dags/kai_scale_nightly.py): the view links to its runs, and shows the published
# results to whoever may read them.
NIGHTLY_DAG_ID = "kai_scale_nightly"


class KaiScaleViewsPlugin(AirflowPlugin):
    """The trend view: its FastAPI app (pages and chart data) and its entry in Airflow's nav."""

    name = "kai_scale_views"
    # AirflowPlugin's interface: class attributes, read by the plugin manager.
    fastapi_apps = [fastapi_app(dag_id=NIGHTLY_DAG_ID)]  # noqa: RUF012
    external_views = [nav_entry()]  # noqa: RUF012
