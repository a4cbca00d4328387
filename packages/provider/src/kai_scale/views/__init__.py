"""The trend view in the Airflow UI: runs, trends and one run, read from the published results.

Pure modules shape the pages' data (``runs``, ``trends``, ``run_detail``); ``reader`` reads the bucket
through the results hook and caches what it read; ``app`` is the FastAPI app the plugin mounts.
"""
