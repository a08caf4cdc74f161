"""The server-to-client half of the Streamable HTTP transport: the tasks that read what the server sends.

``StreamReaders`` runs, in the transport's nursery, one task per body to read:

- a POST's JSON body: every message in it is handed on; a body without the response loses the call;
- a POST's event stream, parsed by :mod:`runner.protocol.sse`: when it ends or drops before the
  response, it is resumed by GET with ``Last-Event-ID`` within a :class:`.classify.ResumeBudget`, never
  POSTed again; without an event id, with the budget spent, or when the GET is refused, the call ends as
  ``RequestLost(OutcomeUnknown)``;
- the standalone GET stream of the session (server messages unrelated to a request), reconnected with
  backoff until it stops bringing anything; it never takes the transport down. A 401 or 403 to it goes to
  the auth hook as a POST's does (:func:`.authhook.answer_refusal`), and the GET is sent again at once.

What the readers parse goes to the :class:`.connection.Connection`, which decides what is handed on; each
reader runs in its stream's cancel scope, which the connection cancels when it is no longer needed.
"""

from __future__ import annotations

import logging
import math
from typing import Final

import httpx2
import trio

from runner.errors import FrameTooLarge, McpRunError, OutcomeUnknown, TransportError
from runner.protocol.jsonrpc import decode
from runner.protocol.sse import SSEParser
from runner.transports.base import StreamResumed
from runner.transports.http.authhook import MAX_AUTH_RETRIES, answer_refusal
from runner.transports.http.body import ACCEPT_SSE, aclose_response, content_type, pump_body
from runner.transports.http.classify import ResumeBudget
from runner.transports.http.connection import Connection, Stream
from runner.transports.http.params import HttpParams
from runner.transports.http.wire import HttpClient, HttpResponse, take_body

__all__ = ["DRAIN_AFTER_RESPONSE", "GET_HEAD_WAIT", "StreamReaders"]

log = logging.getLogger(__name__)

DRAIN_AFTER_RESPONSE: Final = 1.0
GET_HEAD_WAIT: Final = 1.0


class _Lost(Exception):
    """This stream's response can no longer arrive."""

    def __init__(self, error: TransportError) -> None:
        super().__init__(str(error))
        self.error = error


class StreamReaders:
    """The readers of one connection's response bodies and GET streams (see the module docstring)."""

    def __init__(self, params: HttpParams, client: HttpClient, nursery: trio.Nursery, connection: Connection) -> None:
        self._params = params
        self._client = client
        self._nursery = nursery
        self._connection = connection
        self._name = params.name
        self._get_answered = trio.Event()
        self._get_answered.set()

    def read_sse(self, response: HttpResponse, stream: Stream) -> None:
        """Hand ``response`` (an event stream) to a background reader, which owns it from now on."""
        stream.open = True
        self._nursery.start_soon(self._run_request_stream, response, stream)

    def read_json(self, response: HttpResponse, stream: Stream) -> None:
        """Hand on what ``response`` (a JSON body) holds: at once when the body came in with the head (no task
        to start: the usual case of a small answer), else from a background reader, which owns it from now on."""
        stream.open = True
        try:
            body = take_body(response)
            if body is not None and len(body) > self._params.max_event_bytes:
                raise FrameTooLarge.over("a JSON response", self._params.max_event_bytes, len(body))
        except (FrameTooLarge, httpx2.HTTPError) as exc:
            self._json_lost(stream, exc)
            return
        if body is None:
            self._nursery.start_soon(self._run_json_body, response, stream)
        else:
            self._deliver_json(body, stream)

    def _json_lost(self, stream: Stream, exc: FrameTooLarge | httpx2.HTTPError) -> None:
        """A JSON body that could not be read whole (too large, or broken off) loses its call."""
        what = f"was lost: {exc}" if isinstance(exc, FrameTooLarge) else "broke off"
        self._connection.lose(stream, OutcomeUnknown(f"the JSON response to {stream.request_id!r} {what}"), exc)

    def _deliver_json(self, body: bytes, stream: Stream) -> None:
        """Every message of a JSON body; a body without the response loses the call."""
        for item in decode(body):
            self._connection.dispatch(item, stream)
        self._connection.lose(stream, OutcomeUnknown(f"the JSON body held no response to {stream.request_id!r}"))

    def start_get_stream(self) -> None:
        """Open the GET stream for server messages unrelated to a request, in the background (once per
        session; ``405`` means the server has none)."""
        stream = self._connection.open_get_stream()
        if stream is not None:
            self._get_answered = trio.Event()
            self._nursery.start_soon(self._run_get_stream, stream, self._get_answered)

    async def get_stream_answered(self) -> None:
        """Wait until the GET stream just started has its answer's head (or failed), at most
        ``GET_HEAD_WAIT`` seconds, once; at once when none is starting. The transport waits so before its next
        POST: the server then sees the GET stream before the session's next message (a server may tell a
        stream that was resumed from the session's first GET only by their order)."""
        if not self._get_answered.is_set():
            with trio.move_on_after(GET_HEAD_WAIT):
                await self._get_answered.wait()
            self._get_answered.set()  # waited once: later messages go at once

    # -- a POST's body -------------------------------------------------------------------------------

    async def _run_json_body(self, response: HttpResponse, stream: Stream) -> None:
        chunks: list[bytes] = []
        size = 0

        def on_chunk(chunk: bytes) -> bool:
            nonlocal size
            size += len(chunk)
            if size > self._params.max_event_bytes:
                raise FrameTooLarge.over("a JSON response", self._params.max_event_bytes, size)
            chunks.append(chunk)
            return False

        try:
            with stream.scope:
                try:
                    await pump_body(response, on_chunk)
                except (FrameTooLarge, httpx2.HTTPError) as exc:
                    self._json_lost(stream, exc)
                    return
                self._deliver_json(b"".join(chunks), stream)
        finally:
            await aclose_response(response, self._params.close_timeout)

    async def _consume(self, response: HttpResponse, stream: Stream, *, drain: bool = False) -> bool:
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
                progressed |= self._connection.on_event(event, stream)
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
                    progressed |= self._connection.on_event(event, stream)
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

    async def _run_request_stream(self, response: HttpResponse, stream: Stream) -> None:
        rid = stream.request_id
        try:
            with stream.scope:
                await self._consume(response, stream, drain=True)
                budget = self._budget(self._params.resume_attempts, self._params.resume_timeout)
                while not stream.finished:
                    if self._connection.stateless:
                        raise _Lost(
                            OutcomeUnknown(
                                f"the response stream of request {rid} ended before the response "
                                "(2026-07-28 streams cannot be resumed)"
                            )
                        )
                    if stream.last_event_id is None:
                        raise _Lost(
                            OutcomeUnknown(
                                f"the response stream of request {rid} ended before the response with no event id"
                            )
                        )
                    delay = budget.next_delay(stream.retry_ms)
                    if delay is None:
                        raise _Lost(
                            OutcomeUnknown(
                                f"could not resume the response stream of request {rid}: "
                                f"gave up after {budget.attempt} reconnects"
                            )
                        )
                    await trio.sleep(delay)
                    if stream.session_id != self._connection.session_id:
                        raise _Lost(
                            OutcomeUnknown(f"the session changed while the response stream of request {rid} was down")
                        )
                    if await self._resume(stream, budget):
                        budget.progress()
        except _Lost as exc:
            self._connection.lose(stream, exc.error)
        except FrameTooLarge as exc:
            self._connection.lose(stream, OutcomeUnknown(f"the response stream of request {rid} was lost: {exc}"), exc)
        finally:
            await aclose_response(response, self._params.close_timeout)

    async def _resume(self, stream: Stream, budget: ResumeBudget) -> bool:
        """One GET with ``Last-Event-ID``. True when it brought new events; raises ``_Lost`` when refused."""
        headers = self._connection.headers("GET", ACCEPT_SSE, last_event_id=stream.last_event_id)
        what = (
            f"GET {self._name} (resuming the response stream of request {stream.request_id} "
            f"after event {stream.last_event_id!r})"
        )
        response = await self._open_resume(headers, budget, what)
        if response is None:
            return False
        status = response.status_code
        if status == 200 and content_type(response) == ACCEPT_SSE:
            return await self._consume_resumed(response, stream)
        await aclose_response(response, self._params.close_timeout)
        if status == 404 and "Mcp-Session-Id" in headers:
            self._connection.expire(headers["Mcp-Session-Id"])
            raise _Lost(OutcomeUnknown(f"{what}: the session expired (404)"))
        if status == 429 or status >= 500:
            log.debug("%s: server answered %d", what, status)
            return False
        if status in (401, 403) and await self._renewed(response, headers, what):
            return False
        raise _Lost(
            OutcomeUnknown(f"{what}: server answered {status} {response.reason_phrase}: the stream cannot be resumed")
        )

    async def _consume_resumed(self, response: HttpResponse, stream: Stream) -> bool:
        """Read a resumed stream, having told the session where it resumed."""
        if stream.request_id is not None and stream.last_event_id is not None:
            self._connection.emit(StreamResumed(stream.request_id, stream.last_event_id))
        return await self._consume(response, stream)

    async def _open_resume(self, headers: dict[str, str], budget: ResumeBudget, what: str) -> HttpResponse | None:
        """The resuming GET's response; None when it failed or its headers took longer than the budget."""
        # No side effects: safe to abandon if the headers take longer than the budget.
        with trio.move_on_after(max(budget.remaining(), self._params.connect_timeout)):
            try:
                return await self._client.open("GET", headers)
            except httpx2.TransportError as exc:
                log.debug("%s: %r", what, exc)
        return None

    async def _renewed(self, response: HttpResponse, headers: dict[str, str], what: str) -> bool:
        """Whether OAuth renewed the token a GET was refused for (401/403): the token ran out (or none was held
        yet), and a GET has no side effects, so it is renewed and the GET sent again. A hook that cannot
        authorize (``McpRunError``) is logged, not raised: a GET stream does not take the transport down."""
        if self._params.auth is None:
            return False
        try:
            return await answer_refusal(self._params.auth, response.status_code, response.headers, headers)
        except McpRunError as exc:
            log.debug("%s: the token could not be renewed: %s", what, exc)
            return False

    # -- the standalone GET stream -------------------------------------------------------------------

    async def _run_get_stream(self, stream: Stream, answered: trio.Event) -> None:
        session_id = stream.session_id
        budget = self._budget(self._params.get_stream_attempts, math.inf)
        what = f"GET {self._name} (server messages)"
        with stream.scope:
            try:
                while self._connection.session_id == session_id:
                    progressed = await self._get_once(stream, session_id, answered, what)
                    if progressed is None:
                        return
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
                answered.set()
                self._connection.close_get_stream(stream)

    async def _get_once(self, stream: Stream, session_id: str | None, answered: trio.Event, what: str) -> bool | None:
        """One GET of the standalone stream: whether it made progress (a new event id, as a polling server
        moves our cursor, or any message); None when the stream is over (405: none offered; 404: the session
        expired). A 401 or 403 goes to the auth hook, as a POST's does, and the GET is sent again at once with
        the renewed token (at most ``MAX_AUTH_RETRIES`` times)."""
        delivered = stream.delivered
        challenges = 0
        while True:
            headers = self._connection.headers("GET", ACCEPT_SSE, last_event_id=stream.last_event_id)
            try:
                response = await self._client.open("GET", headers)
            except httpx2.TransportError as exc:
                answered.set()
                log.debug("%s: %r", what, exc)
                return False
            status = response.status_code
            if status == 200 and content_type(response) == ACCEPT_SSE:
                answered.set()
                return await self._consume(response, stream) or stream.delivered > delivered
            await aclose_response(response, self._params.close_timeout)
            if status not in (401, 403) or challenges >= MAX_AUTH_RETRIES:
                break
            challenges += 1
            if not await self._renewed(response, headers, what):
                break
        answered.set()
        if status == 405:
            log.debug("%s: the server offers no GET stream (405)", what)
            return None
        if status == 404 and session_id is not None:
            self._connection.expire(session_id)
            return None
        log.info("%s: server answered %d", what, status)
        return False
