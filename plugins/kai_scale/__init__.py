"""The KAI scale-test pipeline: scenarios, runner, results, and the Airflow glue that runs them."""
