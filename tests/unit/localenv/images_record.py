"""What localenv/images.sh reports having pushed, as the unit tests of its readers give it."""

PUSHED = """\
runner=127.0.0.1:25000/ghcr.io/kai-scale-pipeline/runner:main@sha256:abc
kai_commit=d5bc503a146317e51037d89775d77172c6d12f71
kai_source=/cache/kai-source/d5bc503a1463
kai_image_repository=ghcr.io/kai-scheduler/kai-scheduler
kai_image_tag=d5bc503a1463
airflow_image=ghcr.io/kai-scale-pipeline/airflow:0123456789ab
"""
