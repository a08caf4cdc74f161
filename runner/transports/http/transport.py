"""The Streamable HTTP client transport (MCP 2025-03-26, 2025-06-18 and 2025-11-25).

Out of scope: the stateless 2026-07-28 revision (no ``initialize``, no sessions, no resumption) and the
legacy HTTP+SSE transport of 2024-11-05 (a GET stream announcing a separate POST endpoint).

::

    async with open_http_transport(HttpParams("http://127.0.0.1:8000/mcp")) as transport:
        await transport.send(Request(1, "initialize", {...}))   # returns once the response headers are in
        event = await transport.receive()                        # messages, InvalidMessage, RequestLost

How it speaks HTTP:

- Every message is a POST with ``Accept: application/json, text/event-stream``. ``send`` of a request
  returns as soon as the response's status is known; its body (one JSON document or an SSE stream) is
  read by a background task feeding ``receive``, so many calls are in flight at once. Notifications and
  responses expect ``202``.
- What a failed POST means, and what is done about it, is the table of :mod:`.http_classify`. A request
  that may have reached the server is never POSTed again.
- The ``Mcp-Session-Id`` of the ``initialize`` response is sent on every later request, with
  ``MCP-Protocol-Version`` once ``set_protocol_version`` was called. A 404 to a request that carried
  the session id clears it and raises ``SessionExpired``; the calls still streaming in that session end
  as ``RequestLost(OutcomeUnknown)``. The session is DELETEd on close (bounded in time, errors ignored).
- SSE streams are resumed, never re-POSTed: when a request's stream ends or drops before its response,
  the transport waits the server's ``retry:`` interval exactly, then GETs with ``Last-Event-ID`` (the
  newest id seen, kept across drops) and keeps doing so, backing off, until the response arrives or the
  budget of :class:`.http_classify.ResumeBudget` is spent. Without any event id, with the budget spent, or when the
  GET is refused, the call ends as ``RequestLost(request_id, OutcomeUnknown)``.
- Events are deduplicated by id across the session's streams, and a response to an id that is not in
  flight is dropped (servers replay events already seen; server-everything replays every stream's).
- After ``set_protocol_version`` a background GET stream carries server messages unrelated to a request
  (``405`` means there is none). It reconnects with backoff and never takes the transport down.
- Notifications from a request's stream come out with ``related_request_id`` set to that request;
  from the GET stream with ``None``.
- Redirects are never followed (a 3xx is an ``HTTPStatusError`` naming the ``Location``), credentials in
  the URL are refused (put them in a header), header values are masked in ``repr(params)``, and neither
  they nor the session id appear in errors or logs (``describe()`` drops the URL's query too).
- ``abandon(request_id)`` (the session sent ``notifications/cancelled`` for it) closes that call's stream
  quietly: a disconnect is not a cancellation (2025-11-25), so it is the session's notification that
  cancels, and the connection goes back to the pool.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Final

import httpx2
import trio
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

from runner.errors import (
    ConnectFailed,
    HTTPStatusError,
    NotDelivered,
    OutcomeUnknown,
    SessionExpired,
    TransportError,
)
from runner.protocol.jsonrpc import ErrorResponse, Message, Request, RequestId, decode, encode
from runner.transports.base import TransportEvent
from runner.transports.http.classify import (
    Action,
    backoff_delay,
    classify_exception,
    classify_status,
    parse_retry_after,
)
from runner.transports.http.streams import (
    DEFAULT_MAX_EVENT_BYTES,
    Stream,
    StreamHub,
    aclose_response,
    content_type,
    pump_body,
)

__all__ = ["HttpParams", "HttpTransport", "open_http_transport"]

log = logging.getLogger(__name__)

ACCEPT_POST: Final = "application/json, text/event-stream"
_RESERVED_HEADERS: Final = frozenset(
    {"accept", "content-type", "content-length", "host", "mcp-session-id", "mcp-protocol-version", "last-event-id"}
)
_ERROR_BODY_LIMIT: Final = 4096


@dataclass(frozen=True, slots=True, repr=False)
class HttpParams:
    """How to reach one Streamable HTTP server. Times are in seconds.

    ``url``                  the MCP endpoint, ``http://`` or ``https://``, without credentials
    ``headers``              sent on every request (e.g. ``Authorization``); masked in ``repr``
    ``max_connections``      calls in flight at once (the server's ``max_concurrency``); the pool gets two
                             more, for the GET stream and for notifications
    ``connect_timeout``      to open a connection; ``write_timeout`` to send a body; reads never time out
                             (a tool may run for an hour: the session's call timeout is the bound)
    ``send_attempts``        POSTs of one message the server rate limited (429), in attempts and in
    ``send_max_time``          total time; a POST that could not connect is not retried here (the
                               session's owner waits for the server and decides)
    ``backoff_initial``      the first retry waits this long, doubling up to ``backoff_max``, plus up
    ``backoff_max``, ``jitter``  to ``jitter`` at random
    ``resume_attempts``      GETs with ``Last-Event-ID`` for one outage of one request's stream, and
    ``resume_timeout``         the time they may take; a reconnect that brings new events starts afresh
    ``default_retry_ms``     the first reconnect's wait when the server sent no ``retry:``
    ``open_get_stream``      open the standalone GET stream after the handshake
    ``get_stream_attempts``  consecutive fruitless reconnects of that GET stream before giving it up
    ``max_event_bytes``      cap on one SSE event or JSON body
    ``close_timeout``        bound on the DELETE at close, and on closing a response
    """

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    max_connections: int = 10
    connect_timeout: float = 10.0
    write_timeout: float = 30.0
    send_attempts: int = 5
    send_max_time: float = 60.0
    backoff_initial: float = 0.5
    backoff_max: float = 10.0
    jitter: float = 0.5
    resume_attempts: int = 5
    resume_timeout: float = 60.0
    default_retry_ms: int = 1000
    open_get_stream: bool = True
    get_stream_attempts: int = 5
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    close_timeout: float = 5.0

    def __post_init__(self) -> None:
        try:
            url = httpx2.URL(self.url)
        except httpx2.InvalidURL as exc:
            raise ConnectFailed(f"invalid server URL: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ConnectFailed(f"the server URL must be http:// or https:// with a host, got {_safe_url(url)}")
        if url.userinfo:
            raise ConnectFailed(
                f"the server URL {_safe_url(url)} carries credentials: put credentials in a header "
                "(for example Authorization: Bearer ...), never in the URL"
            )
        headers = dict(self.headers)
        for name, value in headers.items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise ConnectFailed(f"header names and values must be strings (header {name!r})")
            if name.lower() in _RESERVED_HEADERS:
                raise ConnectFailed(f"header {name!r} is set by the transport itself and cannot be configured")
        object.__setattr__(self, "headers", MappingProxyType(headers))
        positive = ("max_connections", "send_attempts", "resume_attempts", "get_stream_attempts", "max_event_bytes")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("connect_timeout", "write_timeout", "send_max_time", "resume_timeout", "close_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        if self.backoff_initial < 0 or self.backoff_max < 0 or self.jitter < 0 or self.default_retry_ms < 0:
            raise ValueError("backoff_initial, backoff_max, jitter and default_retry_ms cannot be negative")

    def __repr__(self) -> str:
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "headers":
                value = {name: "***" for name in value}
            parts.append(f"{f.name}={value!r}")
        return f"HttpParams({', '.join(parts)})"


def _describe_exception(exc: BaseException) -> str:
    """``ConnectError: [Errno 111] Connection refused`` rather than a repr with nested quotes."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _safe_url(url: httpx2.URL) -> str:
    """The URL without userinfo and query (either may hold a secret)."""
    return str(url.copy_with(username=None, password=None, query=None, fragment=None))


class _Retry(Exception):
    """The POST surely did not reach the server (or was rate limited): ``final`` is raised when the
    retries are spent, ``delay`` overrides the backoff (Retry-After)."""

    def __init__(self, final: TransportError, delay: float | None = None) -> None:
        super().__init__(str(final))
        self.final = final
        self.delay = delay


class HttpTransport:
    """The client end of one Streamable HTTP connection; see the module docstring. Built by
    :func:`open_http_transport`, which owns its background tasks."""

    def __init__(self, params: HttpParams, client: httpx2.AsyncClient, nursery: trio.Nursery) -> None:
        self._params = params
        self._client = client
        self._url = httpx2.URL(params.url)
        self._name = _safe_url(self._url)
        self._hub = StreamHub(params, client, nursery, self._name)
        self._closed = False

    @property
    def session_id(self) -> str | None:
        """The ``Mcp-Session-Id`` in use (``None`` before ``initialize`` or after the session expired)."""
        return self._hub.session_id

    # -- the Transport interface -------------------------------------------------------------------

    def describe(self) -> str:
        return self._name

    def set_protocol_version(self, version: str, /) -> None:
        self._hub.protocol_version = version
        if self._params.open_get_stream and not self._closed:
            self._hub.start_get_stream()

    def abandon(self, request_id: RequestId, /) -> None:
        self._hub.abandon(request_id)

    async def receive(self) -> TransportEvent:
        try:
            return await self._hub.events_recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise TransportError(f"{self._name}: the transport is closed") from None

    async def send(self, message: Message, /) -> None:
        """POST ``message``. For a request, return once the response headers are in (its body is read in
        the background); raise ``NotDelivered``, ``SessionExpired``, ``HTTPStatusError``,
        ``ConnectFailed`` or ``OutcomeUnknown`` as the table of :mod:`.http_classify` says."""
        if self._closed:
            raise NotDelivered(f"{self._name}: the transport is closed")
        stream: Stream | None = None
        initialize = False
        if type(message) is Request:
            initialize = message.method == "initialize"
        if self._hub.expired and not initialize:
            # Found out on a stream (a resumption GET answered 404): sending without the session id would
            # only get a 400 "missing session ID"; the session re-initializes and sends again.
            raise SessionExpired(f"{self._name}: the server no longer knows our session")
        if type(message) is Request:
            stream = self._hub.register(message.id)
        body = encode(message)
        handed_off = False
        try:
            response = await self._post_with_retries(body, stream, initialize)
            try:
                handed_off = self._accept(response, stream, initialize)
            finally:
                if not handed_off:
                    await aclose_response(response, self._params.close_timeout)
        finally:
            if stream is not None and not handed_off:
                self._hub.forget(stream)

    # -- POST ----------------------------------------------------------------------------------------

    async def _post_with_retries(self, body: bytes, stream: Stream | None, initialize: bool) -> httpx2.Response:
        p = self._params
        deadline = trio.current_time() + p.send_max_time

        def stop(state: RetryCallState) -> bool:
            return state.attempt_number >= p.send_attempts or trio.current_time() + state.upcoming_sleep > deadline

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome is not None else None
            if isinstance(exc, _Retry) and exc.delay is not None:
                return exc.delay
            return backoff_delay(
                state.attempt_number - 1, initial=p.backoff_initial, maximum=p.backoff_max, jitter=p.jitter
            )

        retrying = AsyncRetrying(
            retry=retry_if_exception_type(_Retry), stop=stop, wait=wait, sleep=trio.sleep, reraise=True
        )
        try:
            return await retrying(self._post_once, body, stream, initialize)
        except _Retry as exc:
            raise exc.final from exc.final.__cause__

    async def _post_once(self, body: bytes, stream: Stream | None, initialize: bool) -> httpx2.Response:
        headers = self._hub.headers(ACCEPT_POST, initialize=initialize)
        headers["Content-Type"] = "application/json"
        sent_session = headers.get("Mcp-Session-Id")
        if stream is not None:
            stream.session_id = sent_session
        what = f"POST {self._name}"
        request = self._client.build_request(
            "POST", self._url, content=body, headers=headers, timeout=self._hub.timeout
        )
        try:
            response = await self._client.send(request, stream=True, follow_redirects=False)
        except (httpx2.TransportError, httpx2.InvalidURL) as exc:
            action = classify_exception(exc).action
            if action is Action.RETRY:
                raise NotDelivered(f"{what}: could not connect: {_describe_exception(exc)}") from exc
            if action is Action.MISCONFIGURED:
                raise ConnectFailed(f"{what}: the request could not be sent: {exc!r}") from exc
            raise OutcomeUnknown(f"{what}: the connection broke after the request may have been sent: {exc!r}") from exc
        status = response.status_code
        if 200 <= status < 300:
            return response
        try:
            detail = await self._error_detail(response)
        finally:
            await aclose_response(response, self._params.close_timeout)
        verdict = classify_status(status, carried_session=sent_session is not None, body=detail)
        error = HTTPStatusError(
            f"{what}: server answered {status} {response.reason_phrase}{detail}",
            status_code=status,
            location=response.headers.get("location"),
        )
        if verdict.action is Action.SESSION_EXPIRED:
            assert sent_session is not None
            if stream is not None:
                self._hub.forget(stream)  # reported by SessionExpired, not by RequestLost
            self._hub.expire_session(sent_session)
            raise SessionExpired(f"{what}: the server no longer knows our session ({status}{detail})") from error
        if verdict.action is Action.RETRY_AFTER:
            raise _Retry(error, parse_retry_after(response.headers.get("retry-after")))
        if verdict.action is Action.IN_DOUBT and stream is not None and not initialize:
            raise OutcomeUnknown(
                f"{what}: server answered {status} before any event: the call may have run{detail}"
            ) from error
        if 300 <= status < 400:
            error = HTTPStatusError(
                f"{what}: server redirected ({status}) to {error.location or '(no Location)'}; redirects are "
                "not followed: configure the final URL",
                status_code=status,
                location=error.location,
            )
        raise error

    async def _error_detail(self, response: httpx2.Response) -> str:
        """A short description of an error body (a JSON-RPC error's message when there is one)."""
        data = bytearray()

        def on_chunk(chunk: bytes) -> bool:
            data.extend(chunk)
            return len(data) >= _ERROR_BODY_LIMIT

        with trio.move_on_after(self._params.close_timeout):
            with suppress(httpx2.HTTPError):
                await pump_body(response, on_chunk)
        if not data.strip():
            return ""
        items = decode(bytes(data)) if content_type(response) == "application/json" else []
        if len(items) == 1 and isinstance(items[0], ErrorResponse):
            return f": {items[0].message} ({items[0].code})"
        text = data[:200].decode("utf-8", errors="replace").strip()
        return f": {text}"

    def _accept(self, response: httpx2.Response, stream: Stream | None, initialize: bool) -> bool:
        """A 2xx to a POST: start reading it. Returns True once a reader owns ``response``."""
        if initialize:
            self._hub.capture_session(response)
        if stream is None:
            return False  # a notification or response: 202, nothing to read
        kind = content_type(response)
        if kind == "text/event-stream":
            self._hub.read_sse(response, stream)
            return True
        if kind == "application/json":
            self._hub.read_json(response, stream)
            return True
        raise OutcomeUnknown(
            f"POST {self._name}: server answered {response.status_code} with content type "
            f"{kind or '(none)'!r}, neither JSON nor an event stream: the call may have run, its result is lost"
        )

    async def _delete_session(self) -> None:
        session_id = self._hub.session_id
        if session_id is None:
            return
        headers = self._hub.headers(ACCEPT_POST)
        with trio.move_on_after(self._params.close_timeout, shield=True):
            try:
                response = await self._client.request(
                    "DELETE", self._url, headers=headers, timeout=self._hub.timeout, follow_redirects=False
                )
            except httpx2.HTTPError as exc:
                log.debug("DELETE %s: %r", self._name, exc)
                return
            if response.status_code >= 400 and response.status_code not in (404, 405):
                log.debug("DELETE %s: server answered %d", self._name, response.status_code)
        self._hub.session_id = None


def _make_client(params: HttpParams) -> httpx2.AsyncClient:
    pool = params.max_connections + 2  # + the GET stream and notifications
    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(connect=params.connect_timeout, read=None, write=params.write_timeout, pool=None),
        limits=httpx2.Limits(max_connections=pool, max_keepalive_connections=pool, keepalive_expiry=4.0),
        follow_redirects=False,
    )


@asynccontextmanager
async def open_http_transport(
    params: HttpParams, *, client: httpx2.AsyncClient | None = None
) -> AsyncIterator[HttpTransport]:
    """Open a transport to ``params.url``; on exit cancel its readers, DELETE the session and close the
    client (only if it was created here; pass ``client`` to inject, e.g. one on ``httpx2.MockTransport``)."""
    owned = client is None
    http = _make_client(params) if client is None else client
    body_error: BaseException | None = None
    transport: HttpTransport | None = None
    try:
        async with trio.open_nursery() as nursery:
            transport = HttpTransport(params, http, nursery)
            try:
                yield transport
            except BaseException as exc:
                if isinstance(exc, GeneratorExit):
                    raise
                # Re-raised below, outside the nursery, so the caller sees its own exception and not an
                # ExceptionGroup wrapping it.
                body_error = exc
            finally:
                transport._closed = True
                nursery.cancel_scope.cancel()
        await transport._delete_session()
    finally:
        if transport is not None:
            transport._hub.events_send.close()
        if owned:
            with trio.move_on_after(params.close_timeout, shield=True):
                await http.aclose()
    if body_error is not None:
        raise body_error
