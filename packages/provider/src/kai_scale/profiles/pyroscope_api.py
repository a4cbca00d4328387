"""A small client of Pyroscope's query API: one service's merged profile over a window.

``SelectMergeProfile`` of ``querier.v1.QuerierService``, called as a Connect unary RPC with the binary
codec (``application/proto``), so the answer is the merged profile's pprof bytes as Pyroscope wrote
them: stored as they are, ``go tool pprof`` opens them. No Airflow here: the connection type that
builds it is ``kai_scale.hooks.pyroscope.PyroscopeHook``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import httpx
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

# Connection failures are retried by the transport; a query that errors is not retried.
CONNECT_RETRIES: Final = 3
SELECT_MERGE_PROFILE: Final = "/querier.v1.QuerierService/SelectMergeProfile"


class PyroscopeError(RuntimeError):
    """Pyroscope could not be reached or refused a query; the message says which and why.

    :param unreachable: no query can succeed (no connection, no answer), so asking again is pointless.
    """

    def __init__(self, message: str, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


class PyroscopeClient:
    """Merged profiles from one Pyroscope.

    :param base_url: e.g. ``http://pyroscope.monitoring:4040`` or an API server service-proxy URL.
    :param bearer_token: sent as ``Authorization: Bearer`` when set (e.g. through a service proxy).
    :param timeout_seconds: per request; merging a long window of a busy service takes seconds.
    """

    def __init__(
        self, base_url: str, *, bearer_token: str | None = None, timeout_seconds: float = 60
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_seconds = timeout_seconds
        headers = {"Authorization": f"Bearer {bearer_token}"} if bearer_token else {}
        try:
            self._http = httpx.Client(
                base_url=self.base_url,
                headers=headers,
                timeout=timeout_seconds,
                transport=httpx.HTTPTransport(retries=CONNECT_RETRIES),
            )
        except httpx.InvalidURL as error:
            raise PyroscopeError(
                f"Pyroscope's URL {base_url!r} is no URL: {error}", unreachable=True
            ) from error

    def __enter__(self) -> PyroscopeClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close its connections."""
        self._http.close()

    def merged_profile(self, *, profile_type: str, service: str, start: datetime, end: datetime) -> bytes:
        """The pprof bytes of ``service``'s profiles of ``profile_type`` from ``start`` to ``end`` merged.

        :param profile_type: Pyroscope's profile type ID (``process_cpu:cpu:nanoseconds:cpu:nanoseconds``).
        :param service: the ``service_name`` the profiles were pushed under (pyroscope-go's application).
        """
        request = select_merge_profile_request(
            profile_type=profile_type, service=service, start=start, end=end
        )
        try:
            response = self._http.post(
                SELECT_MERGE_PROFILE,
                content=request,
                headers={"Content-Type": "application/proto", "Connect-Protocol-Version": "1"},
            )
        # A Pyroscope that took the query but does not answer in time is treated as one that cannot be
        # reached (later queries are not made to wait again), but said as what it is: slow, not down.
        # (A connection that times out is unreachable, after the transport's retries.)
        except (httpx.ReadTimeout, httpx.WriteTimeout) as error:
            raise PyroscopeError(
                f"Pyroscope at {self.base_url} did not answer within {self.timeout_seconds:g} s "
                f"({type(error).__name__}): too slow to ask for more profiles this run",
                unreachable=True,
            ) from error
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise PyroscopeError(
                f"Pyroscope at {self.base_url} is unreachable: {error}", unreachable=True
            ) from error
        if response.status_code != httpx.codes.OK:
            raise PyroscopeError(
                f"Pyroscope at {self.base_url} refused the {profile_type} profile of {service}: "
                f"HTTP {response.status_code}: {_connect_error(response)}"
            )
        return response.content


def _connect_error(response: httpx.Response) -> str:
    # Connect's errors are JSON ({"code", "message"}) whatever the codec; a proxy's may be anything.
    try:
        body = response.json()
    except ValueError:
        return repr(response.text[:200])
    if isinstance(body, dict) and "code" in body:
        return f"{body['code']}: {body.get('message', 'no message')}"
    return repr(response.text[:200])


def select_merge_profile_request(*, profile_type: str, service: str, start: datetime, end: datetime) -> bytes:
    """The ``SelectMergeProfileRequest`` message, serialized: the window in milliseconds since the epoch."""
    return bytes(
        _REQUEST(
            profile_typeID=profile_type,
            label_selector=f'{{service_name="{service}"}}',
            start=int(start.timestamp() * 1000),
            end=int(end.timestamp() * 1000),
        ).SerializeToString()
    )


_Field = descriptor_pb2.FieldDescriptorProto
_PACKAGE: Final = "querier.v1"
# querier.v1's SelectMergeProfileRequest (api/querier/v1/querier.proto in Pyroscope's source), the
# fields sent: max_nodes (5) and stack_trace_selector (6) are left unset, so the profile is whole.
_REQUEST_FIELDS: Final = (
    ("profile_typeID", 1, _Field.TYPE_STRING),
    ("label_selector", 2, _Field.TYPE_STRING),
    ("start", 3, _Field.TYPE_INT64),
    ("end", 4, _Field.TYPE_INT64),
)


def _request_class() -> Any:  # the protobuf runtime's classes are dynamic
    file = descriptor_pb2.FileDescriptorProto(
        name="kai_scale/querier.proto", package=_PACKAGE, syntax="proto3"
    )
    declared = file.message_type.add(name="SelectMergeProfileRequest")
    for name, number, type_ in _REQUEST_FIELDS:
        declared.field.add(name=name, number=number, type=type_, label=_Field.LABEL_OPTIONAL)
    # A pool of our own: Pyroscope's client, if installed, cannot clash with it in the default pool.
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName(f"{_PACKAGE}.SelectMergeProfileRequest")
    )


_REQUEST: Final = _request_class()
