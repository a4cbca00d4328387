"""Publishing a run to the results bucket: results.json, report.json, metrics.json, the manifest."""
