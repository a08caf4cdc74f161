"""The server-to-client half of the Streamable HTTP transport: the streams it reads.

The SSE parser is :mod:`runner.protocol.sse` (sans-IO).

``StreamHub`` holds what the transport's streams share: the session's identity (``Mcp-Session-Id``,
``MCP-Protocol-Version``), the requests awaiting their response, the event ids seen, and the tasks that
read response bodies (JSON or SSE), resume dropped streams by GET with ``Last-Event-ID``, and keep the
standalone GET stream open. Everything they read comes out of one channel as ``TransportEvent``\\ s.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

import httpx2
import trio

from runner.errors import ConnectFailed, FrameTooLarge, OutcomeUnknown, TransportError
from runner.protocol.jsonrpc import ErrorResponse, InvalidMessage, Message, Notification, RequestId, Response, decode
from runner.protocol.sse import DEFAULT_MAX_EVENT_BYTES, SSEEvent, SSEParser
from runner.transports.base import RequestLost, StreamResumed, TransportEvent
from runner.transports.http.classify import ResumeBudget

if TYPE_CHECKING:
    from runner.transports.http.transport import HttpParams

__all__ = [
    "ACCEPT_SSE",
    "DEFAULT_MAX_EVENT_BYTES",
    "Stream",
    "StreamHub",
    "aclose_response",
    "content_type",
    "pump_body",
]

log = logging.getLogger("runner.transports.http.transport")

DRAIN_AFTER_RESPONSE: Final = 1.0
ACCEPT_SSE: Final = "text/event-stream"


# -- reading response bodies --------------------------------------------------------------------------


def content_type(response: httpx2.Response) -> str:
    """The media type of ``response``, lower case, without parameters."""
    value: str = response.headers.get("content-type", "")
    return value.partition(";")[0].strip().lower()


async def pump_body(response: httpx2.Response, on_chunk: Callable[[bytes], bool]) -> None:
    """Feed the body of ``response`` to ``on_chunk`` until it ends or ``on_chunk`` returns True.

    httpx2's body iterators are async generators, and one abandoned mid-way is only finalized by the
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


async def aclose_response(response: httpx2.Response, timeout: float) -> None:
    """Close ``response`` even while being cancelled, bounded in time."""
    with trio.move_on_after(timeout, shield=True):
        await response.aclose()


@dataclass(slots=True, eq=False)
class Stream:
    """One stream we read: a request's (``request_id`` set) or the standalone GET's (``None``)."""

    request_id: RequestId | None
    session_id: str | None = None
    last_event_id: str | None = None
    retry_ms: int | None = None
    finished: bool = False
    delivered: int = 0  # messages handed on from it
    # A reader owns it: send() has returned, so only a RequestLost can report its failure now.
    open: bool = False
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)


class _Lost(Exception):
    """This stream's response can no longer arrive."""

    def __init__(self, error: TransportError) -> None:
        super().__init__(str(error))
        self.error = error


def _valid_session_id(value: str) -> bool:
    return bool(value) and all(0x21 <= ord(c) <= 0x7E for c in value)


class StreamHub:
    """The streams of one Streamable HTTP connection and the state they share (see the module doc)."""

    def __init__(self, params: HttpParams, client: httpx2.AsyncClient, nursery: trio.Nursery, name: str) -> None:
        self._params = params
        self._client = client
        self._nursery = nursery
        self._name = name
        self._url = httpx2.URL(params.url)
        self.timeout = httpx2.Timeout(connect=params.connect_timeout, read=None, write=params.write_timeout, pool=None)
        self.session_id: str | None = None
        # The server forgot our session (a 404 to a stream, or to a POST): nothing but a new `initialize`
        # may be sent until one captures a new session.
        self.expired = False
        self.protocol_version: str | None = None
        self._pending: dict[RequestId, Stream] = {}
        self._last_int_id = 0
        self._string_ids: set[str] = set()
        self._seen_event_ids: set[str] = set()
        self._get_scope: trio.CancelScope | None = None
        self._get_session: str | None = None
        self.events_send, self.events_recv = trio.open_memory_channel[TransportEvent](math.inf)

    def headers(self, accept: str, *, initialize: bool = False, last_event_id: str | None = None) -> dict[str, str]:
        """The headers of one HTTP request: the configured ones, ``Accept``, and the session's."""
        headers = dict(self._params.headers)
        headers["Accept"] = accept
        if not initialize:
            if self.session_id is not None:
                headers["Mcp-Session-Id"] = self.session_id
            if self.protocol_version is not None:
                headers["MCP-Protocol-Version"] = self.protocol_version
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        return headers

    # -- requests in flight --------------------------------------------------------------------------

    def _issued(self, request_id: RequestId) -> bool:
        """Whether a request with this id was ever sent here (ids are issued in order; strings are kept)."""
        if isinstance(request_id, str):
            return request_id in self._string_ids
        return request_id <= self._last_int_id

    def register(self, request_id: RequestId) -> Stream:
        """A request is about to be POSTed: its response is now awaited."""
        if request_id in self._pending:
            raise ValueError(f"request id {request_id!r} is already in flight")
        if isinstance(request_id, str):
            self._string_ids.add(request_id)
        else:
            self._last_int_id = max(self._last_int_id, request_id)
        stream = Stream(request_id)
        self._pending[request_id] = stream
        return stream

    def forget(self, stream: Stream) -> None:
        """``stream`` is over (answered, lost, or reported by ``send`` raising)."""
        stream.finished = True
        if stream.request_id is not None and self._pending.get(stream.request_id) is stream:
            del self._pending[stream.request_id]

    def abandon(self, request_id: RequestId) -> None:
        """The session gave up on ``request_id`` (it sent ``notifications/cancelled``): stop reading its
        stream and free the connection, reporting nothing; a late response would be dropped anyway."""
        stream = self._pending.get(request_id)
        if stream is not None and stream.open:
            self.forget(stream)
            stream.scope.cancel()

    def read_sse(self, response: httpx2.Response, stream: Stream) -> None:
        """Hand ``response`` (an event stream) to a background reader, which owns it from now on."""
        stream.open = True
        self._nursery.start_soon(self._run_request_stream, response, stream)

    def read_json(self, response: httpx2.Response, stream: Stream) -> None:
        """Hand ``response`` (a JSON body) to a background reader, which owns it from now on."""
        stream.open = True
        self._nursery.start_soon(self._run_json_body, response, stream)

    # -- the session ---------------------------------------------------------------------------------

    def capture_session(self, response: httpx2.Response) -> None:
        """Take the ``Mcp-Session-Id`` of the response to ``initialize``, if it has one."""
        session_id = response.headers.get("mcp-session-id")
        if session_id is None:
            return
        if not _valid_session_id(session_id):
            raise ConnectFailed(f"{self._name}: the server sent an invalid Mcp-Session-Id (not visible ASCII)")
        self.expired = False
        if session_id != self.session_id:
            self.session_id = session_id
            self._seen_event_ids.clear()

    def expire_session(self, session_id: str) -> None:
        """The server forgot ``session_id``: clear it, and fail every call still streaming in it."""
        if self.session_id == session_id:
            self.session_id = None
            self.expired = True
            self._seen_event_ids.clear()
            if self._get_scope is not None:
                self._get_scope.cancel()
                self._get_scope = None
        for stream in list(self._pending.values()):
            # A stream whose POST still awaits its status is left alone: that POST's own 404 (or success)
            # decides, and send() reports it.
            if stream.open and stream.session_id == session_id:
                self._lose(stream, OutcomeUnknown("the session expired while the call was in flight"))

    # -- delivering events ---------------------------------------------------------------------------

    def _emit(self, event: TransportEvent) -> None:
        try:
            self.events_send.send_nowait(event)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            log.debug("%s: dropping a %s after close", self._name, type(event).__name__)

    def _lose(self, stream: Stream, error: TransportError, cause: BaseException | None = None) -> None:
        if stream.finished or stream.request_id is None:
            return
        if cause is not None:
            error.__cause__ = cause
        self.forget(stream)
        stream.scope.cancel()
        self._emit(RequestLost(stream.request_id, error))

    def _answered(self, request_id: RequestId, current: Stream) -> bool:
        """``request_id`` got its response: stop its reader unless it is the one reading. False when that
        request is not in flight (a replay, or a response already delivered)."""
        stream = self._pending.get(request_id)
        if stream is None:
            return False
        self.forget(stream)
        if stream is not current:
            stream.scope.cancel()
        return True

    def _dispatch(self, item: Message | InvalidMessage, stream: Stream) -> None:
        stream.delivered += 1
        if isinstance(item, Response | ErrorResponse):
            if item.id is None or self._answered(item.id, stream) or not self._issued(item.id):
                # In flight, or an id never sent on this connection (the string "7" for 7): the session
                # counts and warns about the latter.
                self._emit(item)
            else:
                log.debug("%s: dropping a response to %r, which is not in flight (replayed?)", self._name, item.id)
        elif isinstance(item, Notification):
            self._emit(replace(item, related_request_id=stream.request_id))
        else:
            if isinstance(item, InvalidMessage) and item.request_id is not None:
                self._answered(item.request_id, stream)  # the call fails at once, as a protocol error
            self._emit(item)

    def _on_event(self, event: SSEEvent, stream: Stream) -> bool:
        """Handle one SSE event; True when it carried an event id not seen before."""
        if event.retry is not None:
            stream.retry_ms = event.retry
        new = False
        if event.id:
            if event.id in self._seen_event_ids:
                return False  # a replay of an event already delivered
            self._seen_event_ids.add(event.id)
            stream.last_event_id = event.id
            new = True
        if event.event != "message" or not event.data.strip():
            return new  # a priming event (an id, empty data), or an event type MCP does not use
        for item in decode(event.data):
            self._dispatch(item, stream)
        return new

    # -- readers -------------------------------------------------------------------------------------

    async def _run_json_body(self, response: httpx2.Response, stream: Stream) -> None:
        chunks: list[bytes] = []
        size = 0

        def on_chunk(chunk: bytes) -> bool:
            nonlocal size
            size += len(chunk)
            if size > self._params.max_event_bytes:
                raise FrameTooLarge(f"JSON response over {self._params.max_event_bytes} bytes")
            chunks.append(chunk)
            return False

        rid = stream.request_id
        try:
            with stream.scope:
                try:
                    await pump_body(response, on_chunk)
                except (httpx2.HTTPError, FrameTooLarge) as exc:
                    self._lose(stream, OutcomeUnknown(f"the JSON response to {rid!r} broke off"), exc)
                    return
                for item in decode(b"".join(chunks)):
                    self._dispatch(item, stream)
                self._lose(stream, OutcomeUnknown(f"the JSON body held no response to {rid!r}"))
        finally:
            await aclose_response(response, self._params.close_timeout)

    async def _consume(self, response: httpx2.Response, stream: Stream, *, drain: bool = False) -> bool:
        """Read one SSE response until it ends, drops, or carries this stream's response. True when it
        brought at least one new event id. ``FrameTooLarge`` propagates.

        With ``drain`` (a POST's own stream, which the server ends right after the response), reading goes
        on to the end of the body for at most ``DRAIN_AFTER_RESPONSE`` seconds, so the connection goes back
        to the pool instead of being dropped; the response itself was handed on the moment it arrived. A
        resumed GET may stay open after the response (the SDK's does), so it is not drained."""
        parser = SSEParser(self._params.max_event_bytes)
        progressed = False
        bound = trio.CancelScope()

        def on_chunk(chunk: bytes) -> bool:
            nonlocal progressed
            for event in parser.feed(chunk):
                progressed |= self._on_event(event, stream)
                if stream.finished:
                    if not drain:
                        return True  # the response is in: stop reading
                    bound.deadline = min(bound.deadline, trio.current_time() + DRAIN_AFTER_RESPONSE)
            return False

        try:
            with bound:
                await pump_body(response, on_chunk)
            if not stream.finished:
                for event in parser.close():
                    progressed |= self._on_event(event, stream)
        except (httpx2.TransportError, httpx2.StreamError) as exc:
            log.debug("%s: the stream of %r dropped: %r", self._name, stream.request_id, exc)
        finally:
            await aclose_response(response, self._params.close_timeout)
        return progressed

    def _budget(self, attempts: int, timeout: float) -> ResumeBudget:
        p = self._params
        return ResumeBudget(
            attempts=attempts,
            timeout=timeout,
            default_retry_ms=p.default_retry_ms,
            max_delay=p.backoff_max,
            jitter=p.jitter,
        )

    async def _run_request_stream(self, response: httpx2.Response, stream: Stream) -> None:
        rid = stream.request_id
        try:
            with stream.scope:
                await self._consume(response, stream, drain=True)
                budget = self._budget(self._params.resume_attempts, self._params.resume_timeout)
                while not stream.finished:
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
                    if stream.session_id != self.session_id:
                        raise _Lost(OutcomeUnknown(f"the session changed while the stream of {rid!r} was down"))
                    if await self._resume(stream, budget):
                        budget.progress()
        except _Lost as exc:
            self._lose(stream, exc.error)
        except FrameTooLarge as exc:
            self._lose(stream, OutcomeUnknown(f"an event on the stream of {rid!r} was too large"), exc)
        finally:
            await aclose_response(response, self._params.close_timeout)

    async def _resume(self, stream: Stream, budget: ResumeBudget) -> bool:
        """One GET with ``Last-Event-ID``. True when it brought new events; raises ``_Lost`` when refused."""
        headers = self.headers(ACCEPT_SSE, last_event_id=stream.last_event_id)
        request = self._client.build_request("GET", self._url, headers=headers, timeout=self.timeout)
        what = f"GET {self._name} (resuming {stream.request_id!r} after event {stream.last_event_id!r})"
        response: httpx2.Response | None = None
        # No side effects: safe to abandon if the headers take longer than the budget.
        with trio.move_on_after(max(budget.remaining(), self._params.connect_timeout)):
            try:
                response = await self._client.send(request, stream=True, follow_redirects=False)
            except httpx2.TransportError as exc:
                log.debug("%s: %r", what, exc)
        if response is None:
            return False
        status = response.status_code
        if status == 200 and content_type(response) == ACCEPT_SSE:
            if stream.request_id is not None and stream.last_event_id is not None:
                self.events_send.send_nowait(StreamResumed(stream.request_id, stream.last_event_id))
            return await self._consume(response, stream)
        await aclose_response(response, self._params.close_timeout)
        if status == 404 and "Mcp-Session-Id" in headers:
            self.expire_session(headers["Mcp-Session-Id"])
            raise _Lost(OutcomeUnknown(f"{what}: the session expired (404)"))
        if status == 429 or status >= 500:
            log.debug("%s: server answered %d", what, status)
            return False
        raise _Lost(
            OutcomeUnknown(f"{what}: server answered {status} {response.reason_phrase}: the stream cannot be resumed")
        )

    # -- the standalone GET stream -------------------------------------------------------------------

    def start_get_stream(self) -> None:
        """Open the GET stream for server messages unrelated to a request, in the background (once per
        session; ``405`` means the server has none)."""
        if self._get_scope is not None:
            if self._get_session == self.session_id:
                return
            self._get_scope.cancel()  # it belongs to a session that is gone
        scope = trio.CancelScope()
        self._get_scope = scope
        self._get_session = self.session_id
        self._nursery.start_soon(self._run_get_stream, scope, self.session_id)

    async def _run_get_stream(self, scope: trio.CancelScope, session_id: str | None) -> None:
        stream = Stream(None, session_id)
        budget = self._budget(self._params.get_stream_attempts, math.inf)
        what = f"GET {self._name} (server messages)"
        with scope:
            try:
                while self.session_id == session_id:
                    headers = self.headers(ACCEPT_SSE, last_event_id=stream.last_event_id)
                    request = self._client.build_request("GET", self._url, headers=headers, timeout=self.timeout)
                    progressed = False
                    delivered = stream.delivered
                    try:
                        response = await self._client.send(request, stream=True, follow_redirects=False)
                    except httpx2.TransportError as exc:
                        log.debug("%s: %r", what, exc)
                    else:
                        status = response.status_code
                        if status == 200 and content_type(response) == ACCEPT_SSE:
                            # Progress: a new event id (a polling server moves our cursor), or any message.
                            progressed = await self._consume(response, stream) or stream.delivered > delivered
                        else:
                            await aclose_response(response, self._params.close_timeout)
                            if status == 405:
                                log.debug("%s: the server offers no GET stream (405)", what)
                                return
                            if status == 404 and session_id is not None:
                                self.expire_session(session_id)
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
