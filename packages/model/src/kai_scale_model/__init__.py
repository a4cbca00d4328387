"""What the pipeline and the runner share: scenarios, durations, the runner's interface and outcome. Pure."""
