"""The one place where the Kubernetes client's errors become the pipeline's own.

Modelled on kopf's ``clients/errors.py``: a small hierarchy, and one context manager, ``api_errors``,
around every request ``ClusterHook`` makes (and the scenario operator's, on its pod's client), so that
callers never see a raw ``ApiException``, a dynamic client's error or a socket error.

- ``ClusterUnreachable``: no usable answer (a refused or lost connection, a timeout, or the API server
  failing, 5xx). The message names the connection and the server, and says what to check.
- ``ApiError``: the API server answered and refused the request (4xx); ``status`` says how, and the
  subclasses are the refusals callers handle: ``NotFound`` (with ``KindNotServed`` for a kind the
  server does not serve), ``Conflict``, ``Gone`` (a watch's resourceVersion too old).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http import HTTPStatus

from kubernetes.client.rest import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError
from urllib3.exceptions import HTTPError


class ClusterError(RuntimeError):
    """A request to the target cluster failed; the message says which cluster, and what to do."""


class ClusterUnreachable(ClusterError):
    """The cluster did not answer (or failed to); the message names the connection and what to check."""


class ApiError(ClusterError):
    """The API server refused a request (4xx).

    :param message: the whole message.
    :param status: the HTTP status it answered with.
    """

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class NotFound(ApiError):
    """The object does not exist (404)."""


class KindNotServed(NotFound):
    """The API server serves no such kind (its CRD is not installed, or no longer)."""


class Conflict(ApiError):
    """The object changed, or exists already (409)."""


class Gone(ApiError):
    """A watch's resourceVersion is older than the server's history (410): list again."""


_REFUSALS: dict[int, type[ApiError]] = {
    HTTPStatus.NOT_FOUND: NotFound,
    HTTPStatus.CONFLICT: Conflict,
    HTTPStatus.GONE: Gone,
}


def _reason(error: ApiException) -> str:
    """The server's own message (a Status object's ``message``), else the HTTP reason."""
    try:
        message = json.loads(error.body or "")["message"]
    except (ValueError, TypeError, KeyError):
        return f"{error.status} {error.reason}"
    return f"{error.status} {error.reason}: {message}"


def translated(error: Exception, *, what: str, conn_id: str, host: str) -> ClusterError | None:
    """The pipeline's error for a client's ``error`` raised while doing ``what``; None: not the client's.

    :param what: the request, as a phrase after "to" ("list the nodes").
    :param conn_id: the Airflow connection of the cluster.
    :param host: the API server's URL.
    """
    if isinstance(error, ResourceNotFoundError):
        return KindNotServed(
            f"the cluster of connection '{conn_id}' at {host} serves no such kind, to {what}: {error}",
            status=HTTPStatus.NOT_FOUND,
        )
    if isinstance(error, ApiException) and error.status and 400 <= error.status < 500:
        return _REFUSALS.get(error.status, ApiError)(
            f"the cluster of connection '{conn_id}' at {host} refused to {what}: {_reason(error)}",
            status=error.status,
        )
    if isinstance(error, ApiException | HTTPError | OSError):
        return ClusterUnreachable(
            f"cannot reach the cluster of connection '{conn_id}' at {host}: {error}. "
            "Check that the cluster runs and that the connection's kubeconfig points at it."
        )
    return None


@contextmanager
def api_errors(what: str, *, conn_id: str, host: Callable[[], str]) -> Iterator[None]:
    """Raise the pipeline's error (``translated``) for a client's error raised inside.

    :param host: the API server's URL, asked only when there is an error to name it in.
    """
    try:
        yield
    except ClusterError:
        raise
    except Exception as error:
        mapped = translated(error, what=what, conn_id=conn_id, host=host())
        if mapped is None:
            raise
        raise mapped from error
