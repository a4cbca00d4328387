"""The one map from the Kubernetes client's errors to the pipeline's: each kind of failure, one class."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError
from urllib3.exceptions import MaxRetryError

from kai_scale.hooks.cluster_errors import (
    ApiError,
    ClusterError,
    ClusterUnreachable,
    Conflict,
    Gone,
    KindNotServed,
    NotFound,
    api_errors,
    translated,
)

WHERE = {"what": "list the nodes", "conn_id": "kubernetes_default", "host": "https://10.0.0.1:6443"}


def _refused(status: int, message: str = "nope") -> ApiException:
    error = ApiException(status=status, reason="Refused")
    error.body = json.dumps({"kind": "Status", "message": message})
    return error


@pytest.mark.parametrize(
    ("status", "kind"), [(404, NotFound), (409, Conflict), (410, Gone), (403, ApiError), (422, ApiError)]
)
def test_an_answer_refusing_the_request_is_an_api_error_with_its_status(
    status: int, kind: type[ApiError]
) -> None:
    mapped = translated(_refused(status, "pods is forbidden"), **WHERE)
    assert type(mapped) is kind
    assert isinstance(mapped, ApiError)
    assert mapped.status == status
    assert str(mapped) == (
        f"the cluster of connection 'kubernetes_default' at https://10.0.0.1:6443 refused to list the "
        f"nodes: {status} Refused: pods is forbidden"
    )


def test_a_kind_the_server_does_not_serve_is_not_found() -> None:
    mapped = translated(ResourceNotFoundError("No matches found for {'kind': 'Leftover'}"), **WHERE)
    assert isinstance(mapped, KindNotServed)
    assert isinstance(mapped, NotFound)


@pytest.mark.parametrize(
    "error",
    [
        MaxRetryError(None, "/version", "Connection refused"),  # type: ignore[arg-type]
        ConnectionRefusedError("refused"),
        ApiException(status=503, reason="Service Unavailable"),
    ],
)
def test_no_answer_or_a_failing_server_is_unreachable_and_says_what_to_check(error: Exception) -> None:
    mapped = translated(error, **WHERE)
    assert isinstance(mapped, ClusterUnreachable)
    assert str(mapped) == (
        f"cannot reach the cluster of connection 'kubernetes_default' at https://10.0.0.1:6443: {error}. "
        "Check that the cluster runs and that the connection's kubeconfig points at it."
    )


def test_other_errors_are_not_the_clients_and_pass_unchanged() -> None:
    assert translated(KeyError("spec"), **WHERE) is None
    with pytest.raises(KeyError), api_errors("read it", conn_id="c", host=lambda: "h"):
        raise KeyError("spec")


def test_the_context_manager_raises_the_mapped_error_from_the_clients() -> None:
    with pytest.raises(NotFound) as raised, api_errors("read it", conn_id="c", host=lambda: "h"):
        raise _refused(404)
    assert isinstance(raised.value.__cause__, ApiException)
    # Nested: an error already mapped passes as it is.
    with (
        pytest.raises(ClusterError, match=r"^the cluster of connection 'c' at h refused to read it"),
        api_errors("outer", conn_id="c", host=lambda: "h"),
        api_errors("read it", conn_id="c", host=lambda: "h"),
    ):
        raise _refused(403)
