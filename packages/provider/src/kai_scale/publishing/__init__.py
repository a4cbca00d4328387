"""Publishing a run to the results bucket: results.json, ginkgo-report.json, metrics.json, the manifest."""
