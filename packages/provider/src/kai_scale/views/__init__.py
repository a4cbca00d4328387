"""The trend view in the Airflow UI: runs, trends and one run, read from the published results.

Pure modules shape the pages' data (``runs``, ``trends``, ``run_detail``); ``reader`` reads the bucket
through the results hook and keeps what it read; ``app`` is the FastAPI app of the pages; ``plugin`` is
what the Airflow plugin registers (the app, built on its first request, and the nav entry).
"""
