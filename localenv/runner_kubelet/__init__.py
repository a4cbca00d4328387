"""A kubelet double that really runs the project's runner pods as local processes (local environment only)."""
