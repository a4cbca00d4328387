"""Deployment settings of the pipeline: environment variables, read when the DAG file is parsed.

The dag-processor parses it (the alerts are attached then), and so does each worker before it runs a
task: give all of them the same environment. Reading touches no network, Variable or Connection, so
parsing never depends on a reachable deployment; a bad value is an import error of the DAG file that
names the variable, the value and what is expected.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import timedelta
from email.utils import parseaddr
from pathlib import Path

from kai_scale.cluster import chart_values
from kai_scale.cluster.kai_tuning import DEFAULT_PROFILE, TUNING_DIR, profile_names
from kai_scale.cluster.placement import Placement
from kai_scale.cluster.sources import SOURCE_MIRRORS_VARIABLE, SourceMirrorsError, Sources
from kai_scale_model import runner_interface
from kai_scale_model.durations import parse_duration

DEFAULT_RUNNER_IMAGE = runner_interface.IMAGE_REPOSITORY
# The namespace of the runner pods and of what the runs create besides (KAI_SCALE_NAMESPACE).
DEFAULT_NAMESPACE = "kai-scale"
# The SMTP provider's default connection.
DEFAULT_SMTP_CONN_ID = "smtp_default"
_ADDRESS = re.compile(r"[^\s<>@,;]+@[^\s<>@,;]+")


class SettingsError(ValueError):
    """A deployment setting with a value the pipeline cannot use; the message names the variable."""


def _optional(name: str) -> str | None:
    """The variable's value, or None when it is unset or blank (compose passes unset ones as "")."""
    value = os.environ.get(name, "").strip()
    return value or None


def _address(name: str, text: str) -> str:
    """``ops@example.com`` or ``KAI team <ops@example.com>``, as the mail's headers will carry it."""
    _, address = parseaddr(text)
    if not _ADDRESS.fullmatch(address) or not (text == address or text.endswith(f"<{address}>")):
        raise SettingsError(f"{name} must be mail addresses like ops@example.com, got {text!r}")
    return text


@dataclass(frozen=True, kw_only=True)
class AlertSettings:
    """Where the pipeline's alerts go. Off by default: without a channel no notifier is attached."""

    email_to: tuple[str, ...]
    """``KAI_SCALE_ALERT_EMAIL_TO``: recipients of the alert mail, comma-separated (none: no mail)."""
    email_from: str | None
    """``KAI_SCALE_ALERT_EMAIL_FROM``: the sender; None takes the SMTP connection's ``from_email``."""
    smtp_conn_id: str
    """``KAI_SCALE_ALERT_SMTP_CONN_ID``: the Airflow SMTP connection the mail goes through."""
    webhook_conn_id: str | None
    """``KAI_SCALE_ALERT_WEBHOOK_CONN_ID``: an Airflow HTTP connection whose host is the webhook's URL."""
    run_alert_after: timedelta | None
    """``KAI_SCALE_RUN_ALERT_AFTER``: alert when a run is still going this long after it was queued."""

    @property
    def enabled(self) -> bool:
        """Whether any channel is set."""
        return bool(self.email_to or self.webhook_conn_id)

    @classmethod
    def from_environment(cls) -> AlertSettings:
        """Read the ``KAI_SCALE_ALERT_*`` variables and ``KAI_SCALE_RUN_ALERT_AFTER``."""
        email_to = tuple(
            _address("KAI_SCALE_ALERT_EMAIL_TO", part.strip())
            for part in (_optional("KAI_SCALE_ALERT_EMAIL_TO") or "").split(",")
            if part.strip()
        )
        email_from = _optional("KAI_SCALE_ALERT_EMAIL_FROM")
        smtp_conn_id = _optional("KAI_SCALE_ALERT_SMTP_CONN_ID")
        for name, value in (
            ("KAI_SCALE_ALERT_EMAIL_FROM", email_from),
            ("KAI_SCALE_ALERT_SMTP_CONN_ID", smtp_conn_id),
        ):
            if value is not None and not email_to:
                # Half a mail setting is a mail that silently never goes out.
                raise SettingsError(f"{name} is set ({value!r}) but KAI_SCALE_ALERT_EMAIL_TO is not")
        after_text = _optional("KAI_SCALE_RUN_ALERT_AFTER")
        run_alert_after = None
        if after_text is not None:
            try:
                run_alert_after = parse_duration(after_text)
            except ValueError as error:
                raise SettingsError(f"KAI_SCALE_RUN_ALERT_AFTER {error}") from None
            if run_alert_after <= timedelta(0):
                raise SettingsError(f"KAI_SCALE_RUN_ALERT_AFTER must be positive, got {after_text!r}")
        settings = cls(
            email_to=email_to,
            email_from=_address("KAI_SCALE_ALERT_EMAIL_FROM", email_from) if email_from else None,
            smtp_conn_id=smtp_conn_id or DEFAULT_SMTP_CONN_ID,
            webhook_conn_id=_optional("KAI_SCALE_ALERT_WEBHOOK_CONN_ID"),
            run_alert_after=run_alert_after,
        )
        if run_alert_after is not None and not settings.enabled:
            raise SettingsError(
                f"KAI_SCALE_RUN_ALERT_AFTER is set ({after_text!r}) but no alert channel is: "
                "set KAI_SCALE_ALERT_EMAIL_TO or KAI_SCALE_ALERT_WEBHOOK_CONN_ID"
            )
        return settings


# A label key (optional DNS-subdomain prefix, then a name) and a label value, as Kubernetes checks them.
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}")
_LABEL_VALUE = re.compile(rf"({_LABEL_NAME})?")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True, kw_only=True)
class Toleration:
    """A taint the pipeline's pods tolerate: ``key=value:Effect``, or ``key:Effect`` for any value."""

    key: str
    value: str | None
    """None: any value (operator ``Exists``)."""
    effect: str
    """``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``."""

    def as_pod_spec(self) -> dict[str, str]:
        """The toleration as a pod spec writes it."""
        if self.value is None:
            return {"key": self.key, "operator": "Exists", "effect": self.effect}
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}


def _label_pair(name: str, text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not _LABEL_KEY.fullmatch(key) or not _LABEL_VALUE.fullmatch(value):
        raise SettingsError(f"{name} needs labels like kai-scale.dev/node-role=system, got {text!r}")
    return key, value


def _node_selector(name: str) -> dict[str, str]:
    """``key=value,key=value`` (as in ``kubectl label``)."""
    parts = [part.strip() for part in (_optional(name) or "").split(",") if part.strip()]
    selector: dict[str, str] = {}
    for key, value in (_label_pair(name, part) for part in parts):
        if key in selector:
            raise SettingsError(f"{name} names label {key} twice")
        selector[key] = value
    return selector


def _tolerations(name: str) -> tuple[Toleration, ...]:
    """``key=value:Effect,key:Effect`` (taints as ``kubectl taint`` writes them)."""
    tolerations = []
    for part in (part.strip() for part in (_optional(name) or "").split(",")):
        if not part:
            continue
        taint, colon, effect = part.rpartition(":")
        if not colon or effect not in _TAINT_EFFECTS:
            raise SettingsError(
                f"{name} needs taints like kai-scale.dev/node-role=system:NoSchedule (effect one of "
                f"{', '.join(_TAINT_EFFECTS)}), got {part!r}"
            )
        if "=" in taint:
            key, value = _label_pair(name, taint)
            tolerations.append(Toleration(key=key, value=value, effect=effect))
        elif _LABEL_KEY.fullmatch(taint):
            tolerations.append(Toleration(key=taint, value=None, effect=effect))
        else:
            raise SettingsError(f"{name}: {taint!r} is not a taint key")
    return tuple(tolerations)


# The releases a deployment may leave to its cluster: its own monitoring.
_SKIPPABLE_INSTALLS = ("kube-prometheus-stack", "pyroscope")
# Renamed settings: a deployment that still sets the old name is told, not silently ignored.
_RENAMED = {
    "KAI_SCALE_RUNNER_NODE_SELECTOR": "KAI_SCALE_SYSTEM_NODE_SELECTOR",
    "KAI_SCALE_RUNNER_TOLERATIONS": "KAI_SCALE_SYSTEM_TOLERATIONS",
}


def _skip_installs(name: str) -> frozenset[str]:
    """``kube-prometheus-stack,pyroscope``: what the cluster already runs, so the setup leaves it."""
    names = frozenset(part.strip() for part in (_optional(name) or "").split(",") if part.strip())
    unknown = sorted(names - set(_SKIPPABLE_INSTALLS))
    if unknown:
        raise SettingsError(f"{name} may name {', '.join(_SKIPPABLE_INSTALLS)}; got {', '.join(unknown)}")
    return names


def _refuse_renamed() -> None:
    for old, new in _RENAMED.items():
        if _optional(old) is not None:
            raise SettingsError(f"{old} is now {new} (it also places what the setup installs): rename it")


def _source_mirrors() -> Sources:
    try:
        return Sources.parse(_optional(SOURCE_MIRRORS_VARIABLE))
    except SourceMirrorsError as error:
        raise SettingsError(str(error)) from None


def _tuning_profile(name: str, include_dir: Path) -> str:
    """A tuning profile of ``include/manifests/kai-tuning/``, by name (``scale`` when unset)."""
    profile = _optional(name) or DEFAULT_PROFILE
    available = profile_names(include_dir)
    if profile not in available:
        raise SettingsError(
            f"{name} must name a tuning profile of {include_dir / TUNING_DIR}/ "
            f"({', '.join(available) or 'none there'}), got {profile!r}"
        )
    return profile


def _chart_values_profile(name: str, include_dir: Path) -> str:
    """A chart values profile of ``include/manifests/chart-values/``, by name (``default`` when unset)."""
    profile = _optional(name) or chart_values.DEFAULT_PROFILE
    available = chart_values.profile_names(include_dir)
    if profile not in available:
        raise SettingsError(
            f"{name} must name a chart values profile of {include_dir / chart_values.VALUES_DIR}/ "
            f"({', '.join(available) or 'none there'}), got {profile!r}"
        )
    return profile


@dataclass(frozen=True, kw_only=True)
class ResultsLocation:
    """Where published results are: what the pipeline writes and the trend view reads, from one place."""

    aws_conn_id: str
    """``KAI_SCALE_AWS_CONN_ID``: Airflow connection of the results bucket (may carry an ``endpoint_url``)."""
    bucket: str
    """``KAI_SCALE_RESULTS_BUCKET``: bucket of the run outputs and the published results."""
    prefix: str
    """``KAI_SCALE_RESULTS_PREFIX``: prefix of the published results (``Public/``), ending in ``/``."""

    @classmethod
    def from_environment(cls) -> ResultsLocation:
        """Read the three variables, with the defaults the pipeline has always had."""
        prefix = os.environ.get("KAI_SCALE_RESULTS_PREFIX", "Public/")
        return cls(
            aws_conn_id=os.environ.get("KAI_SCALE_AWS_CONN_ID", "aws_default"),
            bucket=os.environ.get("KAI_SCALE_RESULTS_BUCKET", "kai-scale-results"),
            prefix=prefix if prefix.endswith("/") or not prefix else f"{prefix}/",
        )


@dataclass(frozen=True, kw_only=True)
class PipelineSettings:
    """Where the pipeline runs, where its results go and who hears about a bad run."""

    kubernetes_conn_id: str
    """Airflow connection of the target cluster."""
    aws_conn_id: str
    """Airflow connection of the results bucket (may carry an ``endpoint_url``)."""
    prometheus_conn_id: str
    """Airflow connection (type ``prometheus``) of the Prometheus that watches the target cluster."""
    pyroscope_conn_id: str
    """Airflow connection (type ``pyroscope``) of the Pyroscope KAI's scheduler pushes its profiles to."""
    results_bucket: str
    """Bucket of the run outputs and the published results."""
    results_prefix: str
    """Prefix of the published results (``Public/``)."""
    results_url: str | None
    """``KAI_SCALE_RESULTS_URL``: the published prefix as people open it over HTTP(S), for links."""
    namespace: str
    """Namespace of the runner pods and the workload pods."""
    runner_image: str
    """Repository of the runner image; a run picks only its tag or digest (param ``runner_tag``)."""
    system_node_selector: dict[str, str]
    """``KAI_SCALE_SYSTEM_NODE_SELECTOR``: labels of the nodes the pipeline's pods may run on (none: any).

    The runner pods, and the pods of the charts the setup installs.
    """
    system_tolerations: tuple[Toleration, ...]
    """``KAI_SCALE_SYSTEM_TOLERATIONS``: taints of those nodes that the pipeline's pods tolerate."""

    include_dir: Path
    """The ``include/`` directory: scenarios and manifests."""
    scenarios_dir: Path
    """``KAI_SCALE_SCENARIOS_DIR``: the scenario files (default ``include/scenarios``), e.g. a ConfigMap
    mounted into Airflow's pods, to change the scenarios without building the image again."""
    source_mirrors: Sources
    """``KAI_SCALE_SOURCE_MIRRORS``: mirrors of the charts and manifests the setup installs."""
    skip_installs: frozenset[str]
    """``KAI_SCALE_SKIP_INSTALLS``: monitoring releases the cluster has its own of (not installed)."""
    kai_tuning_profile: str
    """``KAI_SCALE_KAI_TUNING_PROFILE``: how KAI is tuned, a file of ``include/manifests/kai-tuning/``."""
    chart_values_profile: str
    """``KAI_SCALE_CHART_VALUES_PROFILE``: the deployment's values of the charts the setup installs, a
    file of ``include/manifests/chart-values/``."""
    retry_delay_seconds: int
    """Delay before a setup or teardown task is retried."""
    alerts: AlertSettings
    """Where alerts about failed and overdue runs go (none by default)."""

    @property
    def system_placement(self) -> Placement:
        """The system nodes' selector and tolerations, for the pods of what the setup installs."""
        return Placement(
            node_selector=self.system_node_selector,
            tolerations=tuple(toleration.as_pod_spec() for toleration in self.system_tolerations),
        )

    @classmethod
    def from_environment(cls, *, default_include_dir: Path) -> PipelineSettings:
        """Read ``KAI_SCALE_*`` variables, with defaults for the local environment.

        :param default_include_dir: the ``include/`` beside the DAG files, unless ``KAI_SCALE_INCLUDE_DIR``
            names another.
        """
        _refuse_renamed()
        results = ResultsLocation.from_environment()
        results_url = _optional("KAI_SCALE_RESULTS_URL")
        if results_url is not None and not results_url.startswith(("https://", "http://")):
            raise SettingsError(
                "KAI_SCALE_RESULTS_URL must be an http(s) URL of the published prefix, like "
                f"https://kai-scale-results.s3.amazonaws.com/Public/, got {results_url!r}"
            )
        if results_url is not None and not results_url.endswith("/"):
            results_url += "/"
        include_dir = Path(os.environ.get("KAI_SCALE_INCLUDE_DIR", default_include_dir))
        return cls(
            kubernetes_conn_id=os.environ.get("KAI_SCALE_KUBERNETES_CONN_ID", "kubernetes_default"),
            aws_conn_id=results.aws_conn_id,
            prometheus_conn_id=os.environ.get("KAI_SCALE_PROMETHEUS_CONN_ID", "prometheus_default"),
            pyroscope_conn_id=os.environ.get("KAI_SCALE_PYROSCOPE_CONN_ID", "pyroscope_default"),
            results_bucket=results.bucket,
            results_prefix=results.prefix,
            results_url=results_url,
            namespace=os.environ.get("KAI_SCALE_NAMESPACE", DEFAULT_NAMESPACE),
            runner_image=os.environ.get("KAI_SCALE_RUNNER_IMAGE", DEFAULT_RUNNER_IMAGE),
            system_node_selector=_node_selector("KAI_SCALE_SYSTEM_NODE_SELECTOR"),
            system_tolerations=_tolerations("KAI_SCALE_SYSTEM_TOLERATIONS"),
            include_dir=include_dir,
            scenarios_dir=Path(os.environ.get("KAI_SCALE_SCENARIOS_DIR", include_dir / "scenarios")),
            kai_tuning_profile=_tuning_profile("KAI_SCALE_KAI_TUNING_PROFILE", include_dir),
            chart_values_profile=_chart_values_profile(chart_values.PROFILE_VARIABLE, include_dir),
            source_mirrors=_source_mirrors(),
            skip_installs=_skip_installs("KAI_SCALE_SKIP_INSTALLS"),
            retry_delay_seconds=int(os.environ.get("KAI_SCALE_RETRY_DELAY_SECONDS", "30")),
            alerts=AlertSettings.from_environment(),
        )
