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
  budget of :class:`.sse.ResumeBudget` is spent. Without any event id, with the budget spent, or when the
  GET is refused, the call ends as ``RequestLost(request_id, OutcomeUnknown)``.
- Events are deduplicated by id across the session's streams, and a response to an id that is not in
  flight is dropped (servers replay events already seen; server-everything replays every stream's).
- After ``set_protocol_version`` a background GET stream carries server messages unrelated to a request
  (``405`` means there is none). It reconnects with backoff and never takes the transport down.
- Notifications from a request's stream come out with ``related_request_id`` set to that request;
  from the GET stream with ``None``.
- Redirects are never followed (a 3xx is an ``HTTPStatusError`` naming the ``Location``), credentials in
  the URL are refused (put them in a header), and header values are masked in ``repr(params)``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Final

import httpx
import trio
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

from runner.errors import (
    ConnectFailed,
    FrameTooLarge,
    HTTPStatusError,
    NotDelivered,
    OutcomeUnknown,
    SessionExpired,
    TransportError,
)
from runner.jsonrpc import (
    ErrorResponse,
    InvalidMessage,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    decode,
    encode,
)
from runner.transports.base import RequestLost, TransportEvent
from runner.transports.http_classify import (
    Action,
    backoff_delay,
    classify_exception,
    classify_status,
    parse_retry_after,
)
from runner.transports.sse import DEFAULT_MAX_EVENT_BYTES, ResumeBudget, SSEEvent, SSEParser

__all__ = ["HttpParams", "HttpTransport", "open_http_transport"]

log = logging.getLogger(__name__)

ACCEPT_POST: Final = "application/json, text/event-stream"
ACCEPT_SSE: Final = "text/event-stream"
_RESERVED_HEADERS: Final = frozenset(
    {"accept", "content-type", "content-length", "host", "mcp-session-id", "mcp-protocol-version", "last-event-id"}
)
_ERROR_BODY_LIMIT: Final = 4096


@dataclass(frozen=True, slots=True, repr=False)
class HttpParams:
    """How to reach one Streamable HTTP server. Times are seconds unless the name says otherwise.

    ``max_connections`` is how many calls may be in flight at once (the server's ``max_concurrency``);
    the pool holds two more connections, for the GET stream and for notifications. ``send_attempts`` and
    ``send_max_time`` bound the retries of a POST that surely never reached the server (and of a 429).
    ``resume_attempts`` and ``resume_timeout`` bound the reconnects of one dropped stream;
    ``default_retry_ms`` is the first wait when the server sent no ``retry:``. Later waits back off from
    ``backoff_initial`` (or the retry interval) up to ``backoff_max``, plus up to ``jitter`` at random.
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
            url = httpx.URL(self.url)
        except httpx.InvalidURL as exc:
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


def _safe_url(url: httpx.URL) -> str:
    """The URL without userinfo and query (either may hold a secret)."""
    return str(url.copy_with(username=None, password=None, query=None, fragment=None))


def _content_type(response: httpx.Response) -> str:
    value: str = response.headers.get("content-type", "")
    return value.partition(";")[0].strip().lower()


async def _pump(response: httpx.Response, on_chunk: Callable[[bytes], bool]) -> None:
    """Feed the body of ``response`` to ``on_chunk`` until it ends or ``on_chunk`` returns True.

    httpx's body iterators are async generators, and one abandoned mid-way is only finalized by the
    garbage collector (trio warns). So reading is stopped by cancelling it at its next checkpoint, which
    lets every generator in the chain finish, never by breaking out of the loop. An exception raised by
    ``on_chunk`` is re-raised once the generators are done.
    """
    error: Exception | None = None
    with trio.CancelScope() as scope:
        async for chunk in response.aiter_bytes():
            if scope.cancel_called:
                continue
            try:
                if on_chunk(chunk):
                    scope.cancel()
            except Exception as exc:  # re-raised below
                error = exc
                scope.cancel()
    if error is not None:
        raise error


def _valid_session_id(value: str) -> bool:
    return bool(value) and all(0x21 <= ord(c) <= 0x7E for c in value)


@dataclass(slots=True, eq=False)
class _Stream:
    """One SSE (or JSON) stream we read: a request's (``request_id`` set) or the standalone GET's."""

    request_id: RequestId | None
    session_id: str | None
    last_event_id: str | None = None
    retry_ms: int | None = None
    finished: bool = False
    # A reader owns it: send() has returned, so only RequestLost can report its failure now.
    open: bool = False
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)


class _Retry(Exception):
    """Internal: the POST surely did not reach the server (or was rate limited); ``final`` is raised when
    the retries are spent, ``delay`` overrides the backoff (Retry-After)."""

    def __init__(self, final: TransportError, delay: float | None = None) -> None:
        super().__init__(str(final))
        self.final = final
        self.delay = delay


class _Lost(Exception):
    """Internal: this stream's response can no longer arrive."""

    def __init__(self, error: TransportError) -> None:
        super().__init__(str(error))
        self.error = error


class HttpTransport:
    """The client end of one Streamable HTTP connection; see the module docstring. Built by
    :func:`open_http_transport`, which owns its background tasks."""

    def __init__(self, params: HttpParams, client: httpx.AsyncClient, nursery: trio.Nursery) -> None:
        self._params = params
        self._client = client
        self._nursery = nursery
        self._url = httpx.URL(params.url)
        self._timeout = httpx.Timeout(connect=params.connect_timeout, read=None, write=params.write_timeout, pool=None)
        self._session_id: str | None = None
        self._protocol_version: str | None = None
        self._streams: dict[RequestId, _Stream] = {}
        self._seen_event_ids: set[str] = set()
        self._get_scope: trio.CancelScope | None = None
        self._get_session: str | None = None
        self._closed = False
        self._events_send, self._events_recv = trio.open_memory_channel[TransportEvent](math.inf)

    # -- the Transport interface -------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        """The ``Mcp-Session-Id`` in use (``None`` before ``initialize`` or after the session expired)."""
        return self._session_id

    def describe(self) -> str:
        return _safe_url(self._url)

    def set_protocol_version(self, version: str, /) -> None:
        self._protocol_version = version
        if self._params.open_get_stream and not self._closed:
            self._start_get_stream()

    async def receive(self) -> TransportEvent:
        try:
            return await self._events_recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise TransportError(f"{self.describe()}: the transport is closed") from None

    async def send(self, message: Message, /) -> None:
        """POST ``message``. For a request, return once the response headers are in (its body is read in
        the background); raise ``NotDelivered``, ``SessionExpired``, ``HTTPStatusError``,
        ``ConnectFailed`` or ``OutcomeUnknown`` as the classification table says."""
        if self._closed:
            raise NotDelivered(f"{self.describe()}: the transport is closed")
        stream: _Stream | None = None
        initialize = False
        if type(message) is Request:
            if message.id in self._streams:
                raise ValueError(f"request id {message.id!r} is already in flight")
            initialize = message.method == "initialize"
            stream = _Stream(message.id, None)
            self._streams[message.id] = stream
        body = encode(message)
        handed_off = False
        try:
            response = await self._post_with_retries(body, stream, initialize)
            try:
                handed_off = self._accept(response, stream, initialize)
            finally:
                if not handed_off:
                    await self._aclose(response)
        finally:
            if stream is not None and not handed_off:
                self._forget(stream)

    # -- POST ----------------------------------------------------------------------------------------

    def _headers(self, accept: str, *, initialize: bool = False, last_event_id: str | None = None) -> dict[str, str]:
        headers = dict(self._params.headers)
        headers["Accept"] = accept
        if not initialize:
            if self._session_id is not None:
                headers["Mcp-Session-Id"] = self._session_id
            if self._protocol_version is not None:
                headers["MCP-Protocol-Version"] = self._protocol_version
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        return headers

    async def _post_with_retries(self, body: bytes, stream: _Stream | None, initialize: bool) -> httpx.Response:
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

    async def _post_once(self, body: bytes, stream: _Stream | None, initialize: bool) -> httpx.Response:
        headers = self._headers(ACCEPT_POST, initialize=initialize)
        headers["Content-Type"] = "application/json"
        sent_session = headers.get("Mcp-Session-Id")
        if stream is not None:
            stream.session_id = sent_session
        what = f"POST {self.describe()}"
        request = self._client.build_request("POST", self._url, content=body, headers=headers, timeout=self._timeout)
        try:
            response = await self._client.send(request, stream=True, follow_redirects=False)
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            action = classify_exception(exc).action
            if action is Action.RETRY:
                final = NotDelivered(f"{what}: could not connect: {exc!r}")
                final.__cause__ = exc
                raise _Retry(final) from exc
            if action is Action.MISCONFIGURED:
                raise ConnectFailed(f"{what}: the request could not be sent: {exc!r}") from exc
            raise OutcomeUnknown(f"{what}: the connection broke after the request may have been sent: {exc!r}") from exc
        status = response.status_code
        verdict = classify_status(status, carried_session=sent_session is not None)
        if verdict.action is Action.OK:
            return response
        try:
            detail = await self._error_detail(response)
        finally:
            await self._aclose(response)
        error = HTTPStatusError(
            f"{what}: server answered {status} {response.reason_phrase}{detail}",
            status_code=status,
            location=response.headers.get("location"),
        )
        if verdict.action is Action.SESSION_EXPIRED:
            assert sent_session is not None
            if stream is not None:
                self._forget(stream)  # reported by SessionExpired, not by RequestLost
            self._expire_session(sent_session)
            raise SessionExpired(f"{what}: the server no longer knows session {sent_session!r} (404)") from error
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

    async def _error_detail(self, response: httpx.Response) -> str:
        """A short description of an error body (a JSON-RPC error's message when there is one)."""
        data = bytearray()

        def on_chunk(chunk: bytes) -> bool:
            data.extend(chunk)
            return len(data) >= _ERROR_BODY_LIMIT

        with trio.move_on_after(self._params.close_timeout):
            with suppress(httpx.HTTPError):
                await _pump(response, on_chunk)
        if not data.strip():
            return ""
        items = decode(bytes(data)) if _content_type(response) == "application/json" else []
        if len(items) == 1 and isinstance(items[0], ErrorResponse):
            return f": {items[0].message} ({items[0].code})"
        text = data[:200].decode("utf-8", errors="replace").strip()
        return f": {text}"

    def _accept(self, response: httpx.Response, stream: _Stream | None, initialize: bool) -> bool:
        """A 2xx to a POST: start reading it. Returns True once a reader owns ``response``."""
        if initialize:
            self._capture_session(response)
        if stream is None:
            return False  # a notification or response: 202, nothing to read
        kind = _content_type(response)
        if kind == "text/event-stream":
            stream.open = True
            self._nursery.start_soon(self._run_request_stream, response, stream)
            return True
        if kind == "application/json":
            stream.open = True
            self._nursery.start_soon(self._run_json_body, response, stream)
            return True
        raise OutcomeUnknown(
            f"POST {self.describe()}: server answered {response.status_code} with content type "
            f"{kind or '(none)'!r}, neither JSON nor an event stream: the call may have run, its result is lost"
        )

    def _capture_session(self, response: httpx.Response) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id is None:
            return
        if not _valid_session_id(session_id):
            raise ConnectFailed(f"{self.describe()}: the server sent an invalid Mcp-Session-Id (not visible ASCII)")
        if session_id != self._session_id:
            self._session_id = session_id
            self._seen_event_ids.clear()

    # -- session expiry ------------------------------------------------------------------------------

    def _expire_session(self, session_id: str) -> None:
        """The server forgot ``session_id``: clear it, and fail every call still streaming in it."""
        if self._session_id == session_id:
            self._session_id = None
            self._seen_event_ids.clear()
            if self._get_scope is not None:
                self._get_scope.cancel()
                self._get_scope = None
        for stream in list(self._streams.values()):
            # A stream whose POST still awaits its status is not failed here: that POST's own 404 (or
            # success) decides, and send() reports it.
            if stream.open and stream.session_id == session_id:
                self._lose(stream, OutcomeUnknown(f"session {session_id!r} expired while the call was in flight"))

    # -- delivering events ---------------------------------------------------------------------------

    def _emit(self, event: TransportEvent) -> None:
        try:
            self._events_send.send_nowait(event)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            log.debug("%s: dropping an event after close: %r", self.describe(), type(event).__name__)

    def _finish(self, request_id: RequestId, current: _Stream) -> _Stream | None:
        """Mark ``request_id`` answered; stop its reader if that is not the stream we are reading."""
        stream = self._streams.pop(request_id, None)
        if stream is not None:
            stream.finished = True
            if stream is not current:
                stream.scope.cancel()
        return stream

    def _forget(self, stream: _Stream) -> None:
        stream.finished = True
        if stream.request_id is not None and self._streams.get(stream.request_id) is stream:
            del self._streams[stream.request_id]

    def _lose(self, stream: _Stream, error: TransportError, cause: BaseException | None = None) -> None:
        if stream.finished or stream.request_id is None:
            return
        if cause is not None:
            error.__cause__ = cause
        self._forget(stream)
        stream.scope.cancel()
        self._emit(RequestLost(stream.request_id, error))

    def _dispatch(self, item: Message | InvalidMessage, stream: _Stream) -> None:
        if isinstance(item, Response | ErrorResponse):
            if item.id is None:
                self._emit(item)  # an error about no request in particular: the session logs it
            elif self._finish(item.id, stream) is not None:
                self._emit(item)
            else:
                log.debug("%s: dropping a response to %r, which is not in flight (replayed?)", self.describe(), item.id)
        elif isinstance(item, Notification):
            self._emit(replace(item, related_request_id=stream.request_id))
        elif isinstance(item, InvalidMessage):
            if item.request_id is not None:
                self._finish(item.request_id, stream)
            self._emit(item)
        else:
            self._emit(item)

    def _on_event(self, event: SSEEvent, stream: _Stream) -> bool:
        """Handle one SSE event; True when it carried an event id not seen before."""
        if event.retry is not None:
            stream.retry_ms = event.retry
        new = False
        if event.id is not None and event.id != "":
            if event.id in self._seen_event_ids:
                return False  # a replay of an event already delivered
            self._seen_event_ids.add(event.id)
            stream.last_event_id = event.id
            new = True
        if event.event != "message" or not event.data.strip():
            return new  # a priming event (id, empty data) or an event type MCP does not use
        for item in decode(event.data):
            self._dispatch(item, stream)
        return new

    # -- readers -------------------------------------------------------------------------------------

    async def _aclose(self, response: httpx.Response) -> None:
        with trio.move_on_after(self._params.close_timeout, shield=True):
            await response.aclose()

    async def _run_json_body(self, response: httpx.Response, stream: _Stream) -> None:
        try:
            with stream.scope:
                try:
                    body = await self._read_capped(response)
                except (httpx.HTTPError, FrameTooLarge) as exc:
                    self._lose(stream, OutcomeUnknown(f"the JSON response to {stream.request_id!r} broke off"), exc)
                    return
                for item in decode(body):
                    self._dispatch(item, stream)
                self._lose(stream, OutcomeUnknown(f"the JSON body held no response to {stream.request_id!r}"))
        finally:
            await self._aclose(response)

    async def _read_capped(self, response: httpx.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0

        def on_chunk(chunk: bytes) -> bool:
            nonlocal size
            size += len(chunk)
            if size > self._params.max_event_bytes:
                raise FrameTooLarge(f"JSON response over {self._params.max_event_bytes} bytes")
            chunks.append(chunk)
            return False

        await _pump(response, on_chunk)
        return b"".join(chunks)

    async def _consume(self, response: httpx.Response, stream: _Stream) -> bool:
        """Read one SSE response until it ends, drops, or carries this stream's response. True when it
        brought at least one new event id. ``FrameTooLarge`` propagates."""
        parser = SSEParser(self._params.max_event_bytes)
        progressed = False

        def on_chunk(chunk: bytes) -> bool:
            nonlocal progressed
            for event in parser.feed(chunk):
                progressed |= self._on_event(event, stream)
                if stream.finished:
                    return True  # the response is in: stop reading (a resumed GET may stay open)
            return False

        try:
            await _pump(response, on_chunk)
            if not stream.finished:
                for event in parser.close():
                    progressed |= self._on_event(event, stream)
        except (httpx.TransportError, httpx.StreamError) as exc:
            log.debug("%s: stream of %r dropped: %r", self.describe(), stream.request_id, exc)
        finally:
            await self._aclose(response)
        return progressed

    async def _run_request_stream(self, response: httpx.Response, stream: _Stream) -> None:
        p = self._params
        try:
            with stream.scope:
                await self._consume(response, stream)
                budget = ResumeBudget(
                    attempts=p.resume_attempts,
                    timeout=p.resume_timeout,
                    default_retry_ms=p.default_retry_ms,
                    max_delay=p.backoff_max,
                    jitter=p.jitter,
                )
                while not stream.finished:
                    rid = stream.request_id
                    if stream.last_event_id is None:
                        raise _Lost(OutcomeUnknown(f"the stream of {rid!r} ended before the response with no event id"))
                    delay = budget.next_delay(stream.retry_ms)
                    if delay is None:
                        raise _Lost(
                            OutcomeUnknown(
                                f"could not resume the stream of {rid!r}: gave up after {budget.attempt} reconnects"
                            )
                        )
                    await trio.sleep(delay)
                    if stream.session_id != self._session_id:
                        raise _Lost(OutcomeUnknown(f"the session changed while the stream of {rid!r} was down"))
                    if await self._resume(stream, budget):
                        budget.progress()
        except _Lost as exc:
            self._lose(stream, exc.error)
        except FrameTooLarge as exc:
            self._lose(stream, OutcomeUnknown(f"an event on the stream of {stream.request_id!r} was too large"), exc)
        finally:
            await self._aclose(response)

    async def _resume(self, stream: _Stream, budget: ResumeBudget) -> bool:
        """One GET with ``Last-Event-ID``. True when it brought new events; raises ``_Lost`` when refused."""
        headers = self._headers(ACCEPT_SSE, last_event_id=stream.last_event_id)
        request = self._client.build_request("GET", self._url, headers=headers, timeout=self._timeout)
        what = f"GET {self.describe()} (resuming {stream.request_id!r} after event {stream.last_event_id!r})"
        response: httpx.Response | None = None
        with trio.move_on_after(max(budget.remaining(), self._params.connect_timeout)):
            try:
                response = await self._client.send(request, stream=True, follow_redirects=False)
            except httpx.TransportError as exc:
                log.debug("%s: %r", what, exc)
        if response is None:
            return False
        status = response.status_code
        if status == 200 and _content_type(response) == "text/event-stream":
            return await self._consume(response, stream)
        await self._aclose(response)
        if status == 404 and "Mcp-Session-Id" in headers:
            self._expire_session(headers["Mcp-Session-Id"])
            raise _Lost(OutcomeUnknown(f"{what}: the session expired (404)"))
        if status == 429 or status >= 500:
            log.debug("%s: server answered %d", what, status)
            return False
        raise _Lost(
            OutcomeUnknown(f"{what}: server answered {status} {response.reason_phrase}: the stream cannot be resumed")
        )

    # -- the standalone GET stream -------------------------------------------------------------------

    def _start_get_stream(self) -> None:
        if self._get_scope is not None:
            if self._get_session == self._session_id:
                return
            self._get_scope.cancel()  # it belongs to a session that is gone
        scope = trio.CancelScope()
        self._get_scope = scope
        self._get_session = self._session_id
        self._nursery.start_soon(self._run_get_stream, scope, self._session_id)

    async def _run_get_stream(self, scope: trio.CancelScope, session_id: str | None) -> None:
        p = self._params
        stream = _Stream(None, session_id)
        budget = ResumeBudget(
            attempts=p.get_stream_attempts,
            timeout=math.inf,
            default_retry_ms=p.default_retry_ms,
            max_delay=p.backoff_max,
            jitter=p.jitter,
        )
        what = f"GET {self.describe()} (server messages)"
        with scope:
            try:
                while self._session_id == session_id:
                    headers = self._headers(ACCEPT_SSE, last_event_id=stream.last_event_id)
                    request = self._client.build_request("GET", self._url, headers=headers, timeout=self._timeout)
                    progressed = False
                    try:
                        response = await self._client.send(request, stream=True, follow_redirects=False)
                    except httpx.TransportError as exc:
                        log.debug("%s: %r", what, exc)
                    else:
                        status = response.status_code
                        if status == 200 and _content_type(response) == "text/event-stream":
                            progressed = await self._consume(response, stream)
                        else:
                            await self._aclose(response)
                            if status == 405:
                                log.debug("%s: the server offers no GET stream (405)", what)
                                return
                            if status == 404 and session_id is not None:
                                self._expire_session(session_id)
                                return
                            log.info("%s: server answered %d", what, status)
                    if progressed:
                        budget.progress()
                    delay = budget.next_delay(stream.retry_ms)
                    if delay is None:
                        log.warning("%s: giving up after %d reconnects", what, budget.attempt)
                        return
                    await trio.sleep(delay)
            except FrameTooLarge as exc:
                log.warning("%s: %s; the GET stream is closed", what, exc)
            finally:
                if self._get_scope is scope:
                    self._get_scope = None

    # -- closing -------------------------------------------------------------------------------------

    async def _delete_session(self) -> None:
        session_id = self._session_id
        if session_id is None:
            return
        headers = self._headers(ACCEPT_POST)
        with trio.move_on_after(self._params.close_timeout, shield=True):
            try:
                response = await self._client.request(
                    "DELETE", self._url, headers=headers, timeout=self._timeout, follow_redirects=False
                )
            except httpx.HTTPError as exc:
                log.debug("DELETE %s: %r", self.describe(), exc)
                return
            if response.status_code >= 400 and response.status_code not in (404, 405):
                log.debug("DELETE %s: server answered %d", self.describe(), response.status_code)
        self._session_id = None


def _make_client(params: HttpParams) -> httpx.AsyncClient:
    pool = params.max_connections + 2  # + the GET stream and notifications
    return httpx.AsyncClient(
        timeout=httpx.Timeout(connect=params.connect_timeout, read=None, write=params.write_timeout, pool=None),
        limits=httpx.Limits(max_connections=pool, max_keepalive_connections=pool, keepalive_expiry=4.0),
        follow_redirects=False,
    )


@asynccontextmanager
async def open_http_transport(
    params: HttpParams, *, client: httpx.AsyncClient | None = None
) -> AsyncIterator[HttpTransport]:
    """Open a transport to ``params.url``; on exit cancel its readers, DELETE the session and close the
    client (only if it was created here; pass ``client`` to inject, e.g. one on ``httpx.MockTransport``)."""
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
            transport._events_send.close()
        if owned:
            with trio.move_on_after(params.close_timeout, shield=True):
                await http.aclose()
    if body_error is not None:
        raise body_error
