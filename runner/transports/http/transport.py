"""The Streamable HTTP client transport (MCP 2025-03-26, 2025-06-18 and 2025-11-25).

Also the stateless 2026-07-28 revision, once ``set_protocol_version`` names it: no session, no GET stream, no
resumption (a stream that drops before its response loses the request at once), and each request's own
headers (``Request.headers``: ``Mcp-Method``, ``Mcp-Name``...) go on its POST. The legacy HTTP+SSE
transport of 2024-11-05 (a GET stream announcing a separate POST endpoint) is
:mod:`runner.transports.http.legacy_sse`, which :mod:`runner.connect` falls back to.

::

    async with open_http_transport(HttpParams("http://127.0.0.1:8000/mcp")) as transport:
        await transport.send(Request(1, "initialize", {...}))   # returns once the response headers are in
        event = await transport.receive()                        # messages, InvalidMessage, RequestLost

How it speaks HTTP:

- Every message is a POST with ``Accept: application/json, text/event-stream``. ``send`` of a request
  returns as soon as the response's status is known; its body (one JSON document or an SSE stream) is
  read by a background task feeding ``receive``, so many calls are in flight at once. Notifications and
  responses expect ``202``.
- What a failed POST means, and what is done about it, is the table of :mod:`.classify`. A request
  that may have reached the server is never POSTed again.
- The ``Mcp-Session-Id`` of the ``initialize`` response is sent on every later request, with
  ``MCP-Protocol-Version`` once ``set_protocol_version`` was called. A 404 to a request that carried
  the session id clears it and raises ``SessionExpired``; the calls still streaming in that session end
  as ``RequestLost(OutcomeUnknown)``. The session is DELETEd on close (bounded in time, errors ignored).
- SSE streams are resumed, never re-POSTed: when a request's stream ends or drops before its response,
  the transport waits the server's ``retry:`` interval exactly, then GETs with ``Last-Event-ID`` (the
  newest id seen, kept across drops) and keeps doing so, backing off, until the response arrives or the
  budget of :class:`.classify.ResumeBudget` is spent. Without any event id, with the budget spent, or
  when the GET is refused, the call ends as ``RequestLost(request_id, OutcomeUnknown)``.
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

The unit, one idea per module (no module reaches into another's private state):

- :mod:`.params`: ``HttpParams``, checked once; :mod:`.classify`: what a failed POST means (no I/O);
- :mod:`.connection`: ``Connection``, the state the two halves share (the session's identity, the
  requests in flight, the event ids seen) and the one queue of events ``receive`` reads; no I/O;
- :mod:`.post`: ``Poster``, the client-to-server half (POST, the 429 wait, DELETE);
- :mod:`.streams`: ``StreamReaders``, the server-to-client half (JSON bodies, SSE streams and their
  resumption, the GET stream), parsing with :mod:`runner.protocol.sse`; :mod:`.body`: reading a body;
- :mod:`.wire`: what the two halves need from an HTTP client, and which client they get: :mod:`.lean` (h11
  on trio streams) unless a proxy is configured, else httpx2;
- this module: ``HttpTransport``, the ``Transport`` interface over them, and ``open_http_transport``,
  which owns the readers' nursery and the order of closing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import trio

from runner.errors import NotDelivered, OutcomeUnknown, SessionExpired
from runner.protocol.jsonrpc import Message, Request, RequestId, encode
from runner.transports.base import TransportEvent
from runner.transports.http.body import ACCEPT_SSE, aclose_response, aclose_within, content_type
from runner.transports.http.connection import Connection, Stream
from runner.transports.http.params import HttpParams
from runner.transports.http.post import Poster
from runner.transports.http.streams import StreamReaders
from runner.transports.http.wire import HttpClient, HttpResponse, HttpxClient, make_client

__all__ = ["HttpParams", "HttpTransport", "open_http_transport"]


class HttpTransport:
    """The client end of one Streamable HTTP connection; see the module docstring. Built by
    :func:`open_http_transport`, which owns its background tasks and closes it."""

    def __init__(self, params: HttpParams, client: HttpClient, nursery: trio.Nursery) -> None:
        self._params = params
        self._name = params.name
        self._connection = Connection(params.headers, self._name, params.auth)
        self._poster = Poster(params, client, self._connection)
        self._readers = StreamReaders(params, client, nursery, self._connection)
        self._sending = True

    @property
    def session_id(self) -> str | None:
        """The ``Mcp-Session-Id`` in use (``None`` before ``initialize`` or after the session expired)."""
        return self._connection.session_id

    @property
    def event_ids(self) -> bool | None:
        """Whether the server's SSE streams carry event ids (:class:`~runner.transports.base.EventIds`)."""
        return self._connection.event_ids

    # -- the Transport interface -------------------------------------------------------------------

    def describe(self) -> str:
        return self._name

    def set_protocol_version(self, version: str, /) -> None:
        self._connection.set_protocol_version(version)
        if self._params.open_get_stream and self._sending and not self._connection.stateless:
            self._readers.start_get_stream()

    def abandon(self, request_id: RequestId, /) -> None:
        self._connection.abandon(request_id)

    async def receive(self) -> TransportEvent:
        return await self._connection.receive()

    async def send(self, message: Message, /) -> None:
        """POST ``message``. For a request, return once the response headers are in (its body is read in
        the background); raise ``NotDelivered``, ``SessionExpired``, ``HTTPStatusError``,
        ``ConnectFailed`` or ``OutcomeUnknown`` as the table of :mod:`.classify` says."""
        initialize = type(message) is Request and message.method == "initialize"
        self._check_sendable(initialize)
        if not initialize:
            await self._readers.get_stream_answered()
        stream = self._connection.register(message.id) if type(message) is Request else None
        body = encode(message)
        handed_off = False
        try:
            extra = message.headers if type(message) is Request else None
            response = await self._poster.post(body, stream, initialize=initialize, extra=extra)
            try:
                handed_off = self._accept(response, stream, initialize)
            finally:
                if not handed_off:
                    await aclose_response(response, self._params.close_timeout)
        finally:
            if stream is not None and not handed_off:
                self._connection.forget(stream)

    def _check_sendable(self, initialize: bool) -> None:
        """Raise ``NotDelivered`` once closed, ``SessionExpired`` (but for ``initialize``) once the session is
        known to be gone: found out on a stream (a resumption GET answered 404), sending without the session
        id would only get a 400 "missing session ID"; the session re-initializes and sends again."""
        if not self._sending:
            raise NotDelivered(f"{self._name}: the transport is closed")
        if self._connection.expired and not initialize:
            raise SessionExpired(f"{self._name}: the server no longer knows our session")

    def _accept(self, response: HttpResponse, stream: Stream | None, initialize: bool) -> bool:
        """A 2xx to a POST: start reading it. Returns True once a reader owns ``response``."""
        if initialize:
            self._connection.capture_session(response.headers.get("mcp-session-id"))
        if stream is None:
            return False  # a notification or response: 202, nothing to read
        kind = content_type(response)
        if kind == ACCEPT_SSE:
            self._readers.read_sse(response, stream)
            return True
        if kind == "application/json":
            self._readers.read_json(response, stream)
            return True
        raise OutcomeUnknown(
            f"POST {self._name}: server answered {response.status_code} with content type "
            f"{kind or '(none)'!r}, neither JSON nor an event stream: the call may have run, its result is lost"
        )

    # -- closing: open_http_transport calls these in this order ------------------------------------

    def stop_sending(self) -> None:
        """From now on ``send`` raises ``NotDelivered`` and no GET stream is opened."""
        self._sending = False

    async def delete_session(self) -> None:
        """DELETE the session on the server, bounded by ``close_timeout`` (errors are ignored)."""
        await self._poster.delete_session()

    def close(self) -> None:
        """``receive`` raises ``TransportError`` once the events already read are taken."""
        self._connection.close()


@asynccontextmanager
async def open_http_transport(
    params: HttpParams, *, client: httpx2.AsyncClient | None = None
) -> AsyncIterator[HttpTransport]:
    """Open a transport to ``params.url``; on exit cancel its readers, DELETE the session and close the
    client (only if it was created here; pass ``client`` to inject, e.g. one on ``httpx2.MockTransport``).
    Without ``client``, :func:`.wire.make_client` chooses the lean client or httpx2."""
    owned = client is None
    http = make_client(params) if client is None else HttpxClient(client, params)
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
                transport.stop_sending()
                nursery.cancel_scope.cancel()
        await transport.delete_session()
    finally:
        if transport is not None:
            transport.close()
        if owned:
            await aclose_within(http, params.close_timeout)
    if body_error is not None:
        raise body_error
