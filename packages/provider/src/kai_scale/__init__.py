"""The KAI scale-test pipeline as an Airflow provider: hooks, scenario operator, tasks, notifiers."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

DISTRIBUTION = "kai-scale-airflow-provider"


def get_provider_info() -> dict[str, Any]:
    """What Airflow's providers manager reads (entry point ``apache_airflow_provider``)."""
    return {
        "package-name": DISTRIBUTION,
        "name": "KAI scale tests",
        "description": "Runs the KAI scheduler's scale tests on a KWOK cluster and publishes their results.",
        "versions": [version(DISTRIBUTION)],
        "integrations": [
            {"integration-name": "KAI scale tests", "tags": ["software"]},
            {
                "integration-name": "Prometheus",
                "external-doc-url": "https://prometheus.io/",
                "tags": ["software"],
            },
        ],
        "operators": [
            {"integration-name": "KAI scale tests", "python-modules": ["kai_scale.operators.scenario_pod"]}
        ],
        "hooks": [
            {
                "integration-name": "KAI scale tests",
                "python-modules": ["kai_scale.hooks.cluster", "kai_scale.hooks.results_bucket"],
            },
            {"integration-name": "Prometheus", "python-modules": ["kai_scale.hooks.prometheus"]},
            {"integration-name": "Pyroscope", "python-modules": ["kai_scale.hooks.pyroscope"]},
        ],
        "notifications": [
            "kai_scale.notifications.run_alerts.RunAlertEmailNotifier",
            "kai_scale.notifications.run_alerts.RunAlertWebhookNotifier",
        ],
        "connection-types": [
            {
                "hook-class-name": "kai_scale.hooks.prometheus.PrometheusHook",
                "hook-name": "Prometheus",
                "connection-type": "prometheus",
                "ui-field-behaviour": {
                    "hidden-fields": ["login", "extra"],
                    "relabeling": {
                        "host": "URL or host",
                        "schema": "Scheme (http, https) or path prefix",
                        "password": "Bearer token",
                    },
                    "placeholders": {
                        "host": "http://prometheus-operated.monitoring:9090",
                        "schema": "api/v1/namespaces/monitoring/services/prometheus-operated:9090/proxy",
                        "password": "optional; sent as Authorization: Bearer",
                    },
                },
            },
            {
                "hook-class-name": "kai_scale.hooks.pyroscope.PyroscopeHook",
                "hook-name": "Pyroscope",
                "connection-type": "pyroscope",
                "ui-field-behaviour": {
                    "hidden-fields": ["login", "extra"],
                    "relabeling": {
                        "host": "URL or host",
                        "schema": "Scheme (http, https) or path prefix",
                        "password": "Bearer token",
                    },
                    "placeholders": {
                        "host": "http://pyroscope.monitoring:4040",
                        "schema": "api/v1/namespaces/monitoring/services/pyroscope:4040/proxy",
                        "password": "optional; sent as Authorization: Bearer",
                    },
                },
            },
        ],
    }
