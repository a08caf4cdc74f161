"""What one Streamable HTTP connection knows and decides, shared by its POST side and its stream readers.

``Connection`` owns the connection's state; the POST side (:mod:`.post`), the stream readers
(:mod:`.streams`) and the transport (:mod:`.transport`) read and change it through its methods only:

- **the session**: its ``Mcp-Session-Id`` (taken from the ``initialize`` response), the negotiated
  ``MCP-Protocol-Version``, and ``expired`` (the server forgot the session: nothing but a new
  ``initialize`` may be sent until one captures a new session id). ``headers()`` puts them on a request.
- **the streams**: one :class:`Stream` per request awaiting its response, the standalone GET stream of
  the current session, and the request ids ever issued: a response to an id issued here but no longer in
  flight is a replay and is dropped; one to an id never issued is handed on (the session counts it).
- **the event ids seen** in this session: an event replayed on any stream is delivered once.
- **the output**: everything read comes out of one channel, :meth:`Connection.receive`, as
  ``TransportEvent``\\ s (messages, ``InvalidMessage``, ``RequestLost``, ``StreamResumed``).

It does no I/O. Readers hand it what they parse (:meth:`Connection.on_event`, :meth:`Connection.dispatch`)
and it decides what goes out. Every reader runs inside its stream's ``scope``: cancelling that scope is how
the connection stops a reader whose response arrived on another stream, whose session expired, or whose
request the session abandoned.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import trio

from runner.errors import ConnectFailed, OutcomeUnknown, TransportError
from runner.protocol.jsonrpc import ErrorResponse, InvalidMessage, Message, Notification, RequestId, Response, decode
from runner.protocol.sse import SSEEvent
from runner.transports.base import RequestLost, TransportEvent
from runner.transports.http.authhook import AuthHook

__all__ = ["STATELESS_SINCE", "Connection", "Stream"]

STATELESS_SINCE = "2026-07-28"
"""The first revision without sessions and resumption (revisions are dates: they sort as text)."""

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class Stream:
    """One stream read from the server: a request's (``request_id`` set) or the standalone GET's (``None``).

    ``session_id``     the session it belongs to (for a request: the one its POST carried)
    ``last_event_id``  the resumption cursor: the newest event id seen on it, kept across drops
    ``retry_ms``       the server's latest ``retry:`` on it
    ``delivered``      messages handed on from it
    ``open``           a reader owns it: ``send`` has returned, so only ``RequestLost`` can report its failure
    ``finished``       it is over: answered, lost, abandoned, or reported by ``send`` raising
    ``scope``          the cancel scope its reader runs in
    """

    request_id: RequestId | None
    session_id: str | None = None
    last_event_id: str | None = None
    retry_ms: int | None = None
    delivered: int = 0
    open: bool = False
    finished: bool = False
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)


def _valid_session_id(value: str) -> bool:
    return bool(value) and all(0x21 <= ord(c) <= 0x7E for c in value)


class Connection:
    """The state of one Streamable HTTP connection (see the module docstring). ``headers`` are the
    configured ones, sent on every request; ``name`` is the endpoint as errors show it."""

    def __init__(self, headers: Mapping[str, str], name: str, auth: AuthHook | None = None) -> None:
        self._configured = headers
        self._auth = auth
        self._name = name
        self._session_id: str | None = None
        self._protocol_version: str | None = None
        self._expired = False
        self._pending: dict[RequestId, Stream] = {}
        self._last_int_id = 0
        self._string_ids: set[str] = set()
        self._seen_event_ids: set[str] = set()
        self.event_ids: bool | None = None  # whether its SSE streams carry event ids (None: none read yet)
        self._get_stream: Stream | None = None
        self._events_send, self._events_recv = trio.open_memory_channel[TransportEvent](math.inf)

    # -- the session ---------------------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        """The ``Mcp-Session-Id`` in use (``None`` before ``initialize`` or after the session expired)."""
        return self._session_id

    @property
    def expired(self) -> bool:
        """The server forgot our session: only a new ``initialize`` may be sent."""
        return self._expired

    def set_protocol_version(self, version: str) -> None:
        """Send ``MCP-Protocol-Version: version`` on every request after ``initialize``."""
        self._protocol_version = version

    @property
    def stateless(self) -> bool:
        """The negotiated revision is 2026-07-28 or later: no session, no GET stream, no resumption."""
        return self._protocol_version is not None and self._protocol_version >= STATELESS_SINCE

    def headers(
        self, method: str, accept: str, *, initialize: bool = False, last_event_id: str | None = None
    ) -> dict[str, str]:
        """The headers of one HTTP request sent with ``method``: the configured ones, ``Accept``, the auth
        hook's, and the session's (not on ``initialize``, which starts a session)."""
        headers = dict(self._configured)
        headers["Accept"] = accept
        if self._auth is not None:
            headers.update(self._auth.headers(method))
        if not initialize:
            if self._session_id is not None:
                headers["Mcp-Session-Id"] = self._session_id
            if self._protocol_version is not None:
                headers["MCP-Protocol-Version"] = self._protocol_version
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        return headers

    def capture_session(self, session_id: str | None) -> None:
        """Take the ``Mcp-Session-Id`` of the response to ``initialize`` (``None``: it carried none).
        Raises ``ConnectFailed`` for a value that is not visible ASCII."""
        if session_id is None:
            return
        if not _valid_session_id(session_id):
            raise ConnectFailed(f"{self._name}: the server sent an invalid Mcp-Session-Id (not visible ASCII)")
        self._expired = False
        if session_id != self._session_id:
            self._session_id = session_id
            self._seen_event_ids.clear()

    def expire(self, session_id: str) -> None:
        """The server forgot ``session_id``: if it is the current one, clear it and close its GET stream;
        fail every call still streaming in it (``RequestLost(OutcomeUnknown)``)."""
        if self._session_id == session_id:
            self._session_id = None
            self._expired = True
            self._seen_event_ids.clear()
            if self._get_stream is not None:
                self._get_stream.scope.cancel()
                self._get_stream = None
        for stream in list(self._pending.values()):
            # A stream whose POST still awaits its status is left alone: that POST's own 404 (or success)
            # decides, and send() reports it.
            if stream.open and stream.session_id == session_id:
                self.lose(stream, OutcomeUnknown("the session expired while the call was in flight"))

    def end_session(self) -> None:
        """The session was closed (DELETE at close): no session id from now on."""
        self._session_id = None

    # -- the streams ---------------------------------------------------------------------------------

    def register(self, request_id: RequestId) -> Stream:
        """A request is about to be POSTed: its response is now awaited, on the returned stream."""
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
        """``stream`` is over (answered, lost, or reported by ``send`` raising). Idempotent."""
        stream.finished = True
        if stream.request_id is not None and self._pending.get(stream.request_id) is stream:
            del self._pending[stream.request_id]

    def abandon(self, request_id: RequestId) -> None:
        """The session gave up on ``request_id``: stop reading its stream and free the connection,
        reporting nothing; a late response would be dropped anyway. Nothing happens while its POST still
        awaits its status (cancelling that is the caller's)."""
        stream = self._pending.get(request_id)
        if stream is not None and stream.open:
            self.forget(stream)
            stream.scope.cancel()

    def lose(self, stream: Stream, error: TransportError, cause: BaseException | None = None) -> None:
        """The response on ``stream`` can no longer arrive: stop its reader and report
        ``RequestLost(error)`` (once; nothing for the GET stream or a stream already over)."""
        if stream.finished or stream.request_id is None:
            return
        if cause is not None:
            error.__cause__ = cause
        self.forget(stream)
        stream.scope.cancel()
        self.emit(RequestLost(stream.request_id, error))

    def open_get_stream(self) -> Stream | None:
        """The standalone GET stream of the current session, for a reader to run in its ``scope``; ``None``
        when one is already open for this session. One left from an earlier session is cancelled."""
        current = self._get_stream
        if current is not None:
            if current.session_id == self._session_id:
                return None
            current.scope.cancel()  # it belongs to a session that is gone
        stream = Stream(None, self._session_id)
        self._get_stream = stream
        return stream

    def close_get_stream(self, stream: Stream) -> None:
        """The reader of the GET stream ``stream`` is done: a later ``open_get_stream`` opens another."""
        if self._get_stream is stream:
            self._get_stream = None

    # -- what the server sent ------------------------------------------------------------------------

    def on_event(self, event: SSEEvent, stream: Stream) -> bool:
        """Handle one SSE event read on ``stream``; True when it carried an event id not seen before."""
        if event.retry is not None:
            stream.retry_ms = event.retry
        new = False
        if event.id:
            self.event_ids = True
            if event.id in self._seen_event_ids:
                return False  # a replay of an event already delivered
            self._seen_event_ids.add(event.id)
            stream.last_event_id = event.id
            new = True
        if event.event != "message" or not event.data.strip():
            return new  # a priming event (an id, empty data), or an event type MCP does not use
        if self.event_ids is None:
            self.event_ids = False  # a message, and no event id before it
        for item in decode(event.data):
            self.dispatch(item, stream)
        return new

    def dispatch(self, item: Message | InvalidMessage, stream: Stream) -> None:
        """Hand on one message read on ``stream``: a response ends its request's stream (whichever stream
        carried it), a notification is tagged with the request of the stream it came on."""
        stream.delivered += 1
        if isinstance(item, Response | ErrorResponse):
            if item.id is None or self._answered(item.id, stream) or not self._issued(item.id):
                # In flight, or an id never sent on this connection (the string "7" for 7): the session
                # counts and warns about the latter.
                self.emit(item)
            else:
                log.debug("%s: dropping a response to %r, which is not in flight (replayed?)", self._name, item.id)
        elif isinstance(item, Notification):
            self.emit(replace(item, related_request_id=stream.request_id))
        else:
            if isinstance(item, InvalidMessage) and item.request_id is not None:
                self._answered(item.request_id, stream)  # the call fails at once, as a protocol error
            self.emit(item)

    def emit(self, event: TransportEvent) -> None:
        """Queue ``event`` for :meth:`receive` (dropped once the connection is closed)."""
        try:
            self._events_send.send_nowait(event)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            log.debug("%s: dropping a %s after close", self._name, type(event).__name__)

    async def receive(self) -> TransportEvent:
        """The next event; ``TransportError`` once the connection is closed and every event was taken."""
        try:
            return await self._events_recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise TransportError(f"{self._name}: the transport is closed") from None

    def close(self) -> None:
        """No more events: :meth:`receive` raises once the queued ones are taken."""
        self._events_send.close()

    def _issued(self, request_id: RequestId) -> bool:
        """Whether a request with this id was ever sent here (ids are issued in order; strings are kept)."""
        if isinstance(request_id, str):
            return request_id in self._string_ids
        return request_id <= self._last_int_id

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
