"""The ``kai-scale-runner`` command a runner pod executes; never imports Airflow or boto3."""
