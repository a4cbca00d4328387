"""The runner: what a runner pod executes (``kai-scale-runner``), running one scenario in the cluster."""
