"""The pipeline's Airflow plugin: its UI views (the trend view of issue 14 arrives here).

Airflow's plugin manager imports every ``.py`` under ``plugins/`` as a top-level module named after its
file, so this folder holds only this module; the code it serves lives in the installed ``kai_scale``
provider.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin


class KaiScaleViewsPlugin(AirflowPlugin):
    """Registers the pipeline's views with Airflow (none yet: the trend view is issue 14's)."""

    name = "kai_scale_views"
