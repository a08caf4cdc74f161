"""The client end of the 2024-11-05 "HTTP with SSE" transport: deprecated since 2025-03-26, still served
by many deployed servers (and by the official SDKs' ``sse`` mode).

::

    async with open_legacy_sse_transport(HttpParams("http://127.0.0.1:8000/sse")) as transport:
        await transport.send(Request(1, "initialize", {...}))   # returns once the POST is accepted
        event = await transport.receive()                        # from the event stream

How it speaks HTTP:

- Opening GETs the URL (``Accept: text/event-stream``, the configured headers). The server's first event
  must be ``endpoint``: its data is the URL to POST messages to, relative to the GET's. It must be on the
  same origin (scheme, host and port): the configured headers (credentials) go there. No ``endpoint``
  within ``connect_timeout``, or a GET that is refused, is ``ConnectFailed``.
- Every later ``message`` event holds a JSON-RPC message: responses, notifications, the server's own
  requests. Other events are ignored.
- ``send`` POSTs one message to the endpoint (``Content-Type: application/json``) and returns once the
  server accepted it (``202``; any 2xx). What a refused or failed POST means is :mod:`.http.classify`'s
  table, without the rows about sessions and resumption; nothing that may have reached the server is
  POSTed again.
- **No resumption in this era.** The event stream is the session: when it ends or breaks, ``receive``
  raises ``TransportError`` from then on. The session fails every call still waiting, as
  ``OutcomeUnknown`` when its request went out (the item is *in doubt* unless it is safe to repeat), and
  the owner of the session opens a new one (a new GET). ``send`` raises ``NotDelivered`` after that.
- ``set_protocol_version`` and ``abandon`` do nothing: there is no version header and nothing held per
  request. ``describe()`` is the GET URL without its query; the endpoint's query (it holds the server's
  session id) is never shown.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import httpx2
import trio

from runner._trio import single_error
from runner.errors import (
    ConnectFailed,
    FrameTooLarge,
    HTTPStatusError,
    NotDelivered,
    OutcomeUnknown,
    ProtocolError,
    TransportError,
    first_line,
)
from runner.protocol.jsonrpc import Message, Request, RequestId, decode, encode
from runner.protocol.sse import SSEEvent, SSEParser
from runner.transports.base import TransportEvent
from runner.transports.http.body import (
    ACCEPT_SSE,
    aclose_response,
    aclose_within,
    content_type,
    pump_body,
    read_error_body,
)
from runner.transports.http.classify import Action, classify_exception, classify_status
from runner.transports.http.params import HttpParams, safe_url

__all__ = ["LEGACY_ERA", "LegacySseTransport", "open_legacy_sse_transport", "speaks_legacy_sse"]

LEGACY_ERA: Final = "2024-11-05 HTTP+SSE"
_ERROR_BODY_LIMIT: Final = 200


_LEGACY_REFUSALS: Final = frozenset({400, 404, 405})


def speaks_legacy_sse(error: BaseException) -> bool:
    """Whether a failed Streamable HTTP handshake may mean a 2024-11-05 HTTP+SSE server: the ``initialize``
    POST was refused with 400, 404 or 405 and a body that is no JSON-RPC error (the revision's backwards
    compatibility rule). ``error`` is what the handshake raised; the refusal is found in its causes."""
    seen = 0
    cause: BaseException | None = error
    while cause is not None and seen < 10:
        if isinstance(cause, HTTPStatusError):
            return cause.status_code in _LEGACY_REFUSALS and not cause.jsonrpc_error
        cause, seen = cause.__cause__, seen + 1
    return False


class LegacySseTransport:
    """One 2024-11-05 HTTP+SSE connection; see the module docstring. Built by
    :func:`open_legacy_sse_transport`, which owns the task reading the event stream."""

    def __init__(self, params: HttpParams, client: httpx2.AsyncClient) -> None:
        self._params = params
        self._client = client
        self._name = params.name
        self._url = httpx2.URL(params.url)
        self._endpoint: httpx2.URL | None = None
        self._final: TransportError | ProtocolError | None = None
        self._send_events, self._events = trio.open_memory_channel[TransportEvent](math.inf)

    @property
    def endpoint(self) -> str | None:
        """Where messages are POSTed, as the server announced it (None until then)."""
        return None if self._endpoint is None else str(self._endpoint)

    # -- the Transport interface -------------------------------------------------------------------

    def describe(self) -> str:
        return self._name

    def set_protocol_version(self, version: str, /) -> None:
        """Nothing to do: this era sends no version header."""

    def abandon(self, request_id: RequestId, /) -> None:
        """Nothing to do: nothing is held per request (the response, if it comes, is counted as late)."""

    async def receive(self) -> TransportEvent:
        try:
            return await self._events.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            assert self._final is not None
            raise self._final from None

    async def send(self, message: Message, /) -> None:
        """POST ``message`` to the endpoint; raise ``NotDelivered``, ``HTTPStatusError``, ``ConnectFailed`` or
        ``OutcomeUnknown`` as the module docstring says."""
        what = f"POST {self._name} (2024-11-05 message endpoint)"
        if self._final is not None or self._endpoint is None:
            reason = first_line(self._final) if self._final is not None else "no endpoint yet"
            raise NotDelivered(f"{what}: not sent, the event stream is gone: {reason}")
        request = type(message) is Request
        headers = {**self._params.headers, "Content-Type": "application/json"}
        http_request = self._client.build_request(
            "POST", self._endpoint, content=encode(message), headers=headers, timeout=self._params.timeout
        )
        try:
            response = await self._client.send(http_request, stream=True, follow_redirects=False)
        except (httpx2.TransportError, httpx2.InvalidURL) as exc:
            action = classify_exception(exc).action
            if action is Action.RETRY:
                raise NotDelivered(f"{what}: could not connect: {exc}") from exc
            if action is Action.MISCONFIGURED:
                raise ConnectFailed(f"{what}: the request could not be sent: {exc!r}") from exc
            raise OutcomeUnknown(f"{what}: the connection broke after the message may have been sent: {exc!r}") from exc
        try:
            status = response.status_code
            if 200 <= status < 300:
                return
            detail = await self._error_text(response)
        finally:
            await aclose_response(response, self._params.close_timeout)
        error = HTTPStatusError(
            f"{what}: server answered {status} {response.reason_phrase}{detail}", status_code=status
        )
        if classify_status(status, carried_session=False).action is Action.IN_DOUBT and request:
            raise OutcomeUnknown(f"{what}: server answered {status}: the call may have run{detail}") from error
        raise error

    # -- the event stream ---------------------------------------------------------------------------

    async def run_stream(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """GET the event stream, report started once the ``endpoint`` event is in, then deliver messages
        until the stream ends. Raises ``ConnectFailed`` before it started; after, an end is reported by
        ``receive``."""
        response = await self._open()
        parser = SSEParser(self._params.max_event_bytes)
        started = False
        waiting = trio.CancelScope(deadline=trio.current_time() + self._params.connect_timeout)

        def on_chunk(chunk: bytes) -> bool:
            nonlocal started
            for event in parser.feed(chunk):
                if event.event == "endpoint" and self._endpoint is None:
                    self._endpoint = self._resolve(event)
                    started = True
                    waiting.deadline = math.inf
                    task_status.started()
                elif event.event == "message":
                    for item in decode(event.data):
                        self._send_events.send_nowait(item)
            return False

        try:
            with waiting:
                await pump_body(response, on_chunk)
            if not started:
                why = (
                    f"no endpoint event within {self._params.connect_timeout:g} s"
                    if waiting.cancelled_caught
                    else "the event stream ended before its endpoint event"
                )
                raise ConnectFailed(f"GET {self._name}: {why}")
            self._lose(TransportError(f"{self._name}: the server closed the {LEGACY_ERA} event stream"))
        except (httpx2.TransportError, httpx2.StreamError) as exc:
            if not started:
                raise ConnectFailed(f"GET {self._name}: the event stream broke: {exc!r}", retryable=True) from exc
            self._lose(TransportError(f"{self._name}: the {LEGACY_ERA} event stream broke: {exc!r}"))
        except FrameTooLarge as exc:
            if not started:
                raise ConnectFailed(f"GET {self._name}: {exc}") from exc
            self._lose(exc)
        finally:
            await aclose_response(response, self._params.close_timeout)

    async def _open(self) -> httpx2.Response:
        headers = {**self._params.headers, "Accept": ACCEPT_SSE, "Cache-Control": "no-cache"}
        request = self._client.build_request("GET", self._url, headers=headers, timeout=self._params.timeout)
        response: httpx2.Response | None = None
        with trio.move_on_after(self._params.connect_timeout):
            try:
                response = await self._client.send(request, stream=True, follow_redirects=False)
            except httpx2.TransportError as exc:
                retryable = classify_exception(exc).action is Action.RETRY
                raise ConnectFailed(f"GET {self._name}: could not connect: {exc}", retryable=retryable) from exc
        if response is None:
            raise ConnectFailed(
                f"GET {self._name}: no answer within {self._params.connect_timeout:g} s", retryable=True
            )
        status, kind = response.status_code, content_type(response)
        if status == 200 and kind == ACCEPT_SSE:
            return response
        try:
            detail = await self._error_text(response)
        finally:
            await aclose_response(response, self._params.close_timeout)
        what = f"server answered {status} {response.reason_phrase}{detail}"
        if status == 200:
            what = f"server answered 200 with content type {kind or '(none)'!r}, not an event stream"
        raise ConnectFailed(
            f"GET {self._name}: {what}: not a {LEGACY_ERA} endpoint",
            retryable=status in HTTPStatusError.RETRYABLE_STATUS,
        )

    def _resolve(self, event: SSEEvent) -> httpx2.URL:
        """The endpoint URL of an ``endpoint`` event: relative to the GET URL, on its origin."""
        try:
            url = self._url.join(event.data.strip())
        except httpx2.InvalidURL as exc:
            raise ConnectFailed(f"GET {self._name}: the endpoint event holds no valid URL: {exc}") from None
        if (url.scheme, url.host, url.port) != (self._url.scheme, self._url.host, self._url.port):
            raise ConnectFailed(
                f"GET {self._name}: the endpoint event names another origin ({safe_url(url)}); refused: the "
                "configured headers would go there"
            )
        return url

    def _lose(self, error: TransportError | ProtocolError) -> None:
        """The stream is over: ``receive`` raises ``error`` once what was read is taken."""
        if self._final is None:
            self._final = error
        self._send_events.close()

    def close(self) -> None:
        self._lose(TransportError(f"{self._name}: the transport is closed"))

    async def _error_text(self, response: httpx2.Response) -> str:
        data = await read_error_body(response, _ERROR_BODY_LIMIT, self._params.close_timeout)
        text = data[:_ERROR_BODY_LIMIT].decode("utf-8", errors="replace").strip()
        return f": {text}" if text else ""


@asynccontextmanager
async def open_legacy_sse_transport(
    params: HttpParams, *, client: httpx2.AsyncClient | None = None
) -> AsyncIterator[LegacySseTransport]:
    """Open the event stream of ``params.url`` and wait for its endpoint (``ConnectFailed`` when there is
    none); on exit stop reading and close the client (only if it was created here)."""
    owned = client is None
    http = client or httpx2.AsyncClient(
        timeout=params.timeout,
        limits=httpx2.Limits(max_connections=params.pool_size, max_keepalive_connections=params.pool_size),
        follow_redirects=False,
    )
    body_error: BaseException | None = None
    transport = LegacySseTransport(params, http)
    try:
        with single_error():
            async with trio.open_nursery() as nursery:
                await nursery.start(transport.run_stream)
                try:
                    yield transport
                except BaseException as exc:
                    if isinstance(exc, GeneratorExit):
                        raise
                    body_error = exc  # re-raised outside the nursery, not wrapped in an ExceptionGroup
                finally:
                    nursery.cancel_scope.cancel()
    finally:
        transport.close()
        if owned:
            await aclose_within(http, params.close_timeout)
    if body_error is not None:
        raise body_error
