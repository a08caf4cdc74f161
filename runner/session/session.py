"""The ``Session``: one MCP session per server, shared by many concurrent callers (see :mod:`runner.session`).

It owns the handshake (its pure parts in :mod:`.handshake`), the id multiplexing (the table of
:mod:`.pending`), the routing of what the server sends, and re-initialization when the server forgot the
session. Sending a request and waiting for it (its write, timeouts, cancellation) is :mod:`.waiting`'s. What
matches nothing is :mod:`.stray`'s to count and show.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final, TypeAlias

import trio

from runner._trio import single_error
from runner.errors import (
    CallTimeout,
    ConnectFailed,
    HTTPStatusError,
    JsonRpcError,
    MalformedMessage,
    McpRunError,
    NotDelivered,
    ProtocolError,
    SessionExpired,
    TransportError,
)
from runner.protocol.jsonrpc import (
    METHOD_NOT_FOUND,
    ErrorResponse,
    IdAllocator,
    InvalidMessage,
    Notification,
    Request,
    RequestId,
    Response,
)
from runner.protocol.mcp import (
    LATEST_PROTOCOL_VERSION,
    LogMessage,
    Tool,
    ToolResult,
    parse_log_message,
    parse_progress,
    parse_tool,
    parse_tool_result,
)
from runner.session.answers import URL_ELICITATION_REQUIRED, Answer, answer_request, url_elicitation_text
from runner.session.deadlines import Deadlines
from runner.session.era import LEGACY_VERSIONS, Era, LegacyEra, ModernEra, modern_error
from runner.session.handshake import (
    client_capabilities,
    initialize_failed,
    initialize_params,
    parse_initialize_result,
)
from runner.session.input_required import resolve_input_required
from runner.session.negotiate import DiscoverInfo, negotiate
from runner.session.options import BeforeSend, ProgressHandler, RequestInfo, SessionOptions
from runner.session.pending import PendingCall, PendingCalls
from runner.session.results import INPUT_REQUIRED, complete_result
from runner.session.sendable import sendable
from runner.session.stray import SessionStats, StrayInput
from runner.session.text import first_line
from runner.session.waiting import CANCEL_NOTIFY_TIMEOUT, Waiting
from runner.transports.base import Queued, RequestLost, StreamResumed, Transport

__all__ = ["CANCEL_NOTIFY_TIMEOUT", "MAX_REINITIALIZE", "MAX_TOOL_PAGES", "Session", "open_session"]

_Waits: TypeAlias = tuple[float | None, float | None, ProgressHandler | None, Callable[[str], None] | None]

MAX_TOOL_PAGES: Final = 1000
MAX_REINITIALIZE: Final = 3


class Session(Waiting):
    """A live MCP session. Create it with :func:`open_session`; everything here is safe to call from many
    tasks at once."""

    def __init__(self, transport: Transport, options: SessionOptions, nursery: trio.Nursery) -> None:
        self._transport = transport
        self._options = options
        self._nursery = nursery
        self._ids = IdAllocator()
        self._pending = PendingCalls()
        # A transport that queues its writes (stdio): a call parks once, its deadline kept by one task.
        self._queue = transport.queue if isinstance(transport, Queued) else None
        self._deadlines = Deadlines()
        self._broken: McpRunError | None = None
        self._broken_event = trio.Event()
        self._tools: list[Tool] | None = None
        self._tools_lock = trio.Lock()
        self._init_lock = trio.Lock()
        self._ready = trio.Event()  # cleared while the session is being re-initialized
        self._ready.set()
        self._generation = 0
        self._followed: dict[RequestId, ProgressHandler] = {}  # progress of calls taken as tasks (session.tasks)
        self.protocol_version: str | None = None
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        self.era_why: str | None = None  # why ``auto`` chose the era, when durability decided (see .negotiate)
        self._era: Era = LegacyEra(LATEST_PROTOCOL_VERSION)  # until negotiate() chose
        # describe() is "stdio: CMD" for a stdio server: its stray lines were on stdout, which says what to fix.
        on_stdout = transport.describe().startswith("stdio:")
        self._http = transport.describe().startswith(("http://", "https://"))
        self._stray = StrayInput(options.name, on_stdout=on_stdout, warn=self._warn)

    @property
    def name(self) -> str:
        return self._options.name

    @property
    def transport(self) -> Transport:
        return self._transport

    @property
    def options(self) -> SessionOptions:
        return self._options

    @property
    def era(self) -> Era:
        """The protocol era spoken (:mod:`.era`); ``era.modern`` once 2026-07-28 was chosen."""
        return self._era

    @property
    def stats(self) -> SessionStats:
        """Stray input counted so far (see :mod:`runner.session.stray`)."""
        return self._stray.stats

    # -- the handshake ---------------------------------------------------------------------------------

    async def initialize(self, version: str | None = None) -> None:
        """Run the handshake (again, after a session expired). Raises ``ConnectFailed`` when the server
        cannot be reached or gives no answer within ``initialize_timeout``, ``ProtocolError`` when it answers
        wrongly. These errors do not name the server: whoever shows them does (``server docs: ...``).
        ``version``: offer exactly this revision (pinned), and fail unless the server chooses it."""
        timeout = self._options.initialize_timeout
        offered = version or LATEST_PROTOCOL_VERSION
        params = initialize_params(self._options, offered)
        try:
            result = await self.request("initialize", params, timeout=timeout, era=LegacyEra(offered))
        except CallTimeout as exc:
            raise self._initialize_failed(exc, f"no answer within {timeout:g} s") from exc
        except TransportError as exc:
            raise self._initialize_failed(exc) from exc
        hello = parse_initialize_result(result)
        if version is not None and hello.protocol_version != version:
            raise ConnectFailed(
                f"could not connect: protocol {version} was asked for (--protocol-version or the server's "
                f"'protocol:'), but the server chose {hello.protocol_version}"
            )
        self._era = LegacyEra(hello.protocol_version)
        self.protocol_version = hello.protocol_version
        capabilities = hello.capabilities
        self.capabilities = capabilities
        self.server_info = hello.server_info
        self.instructions = hello.instructions
        self._tools = None
        self._transport.set_protocol_version(hello.protocol_version)
        await self._transport.send(Notification("notifications/initialized"))
        self._generation += 1
        if "tools" not in capabilities:
            self._warn(f"{self.name}: server does not declare the 'tools' capability; trying anyway")
        level = self._options.server_log_level
        if level is not None and "logging" in capabilities:
            try:
                await self.request("logging/setLevel", {"level": level}, timeout=30, handshake=True)
            except ProtocolError as exc:
                self._warn(f"{self.name}: logging/setLevel {level} refused: {exc}")

    def modern_era(self, version: str) -> ModernEra:
        """The 2026-07-28 era at ``version`` for this session's options and transport."""
        options = self._options
        return ModernEra(
            version,
            client_info={"name": options.client_name, "version": options.client_version},
            capabilities=client_capabilities(options, modern=True),
            log_level=options.server_log_level,
            http=self._http,
        )

    def adopt_modern(self, version: str, info: DiscoverInfo) -> None:
        """Speak 2026-07-28 at ``version`` from now on, with what ``server/discover`` said (:mod:`.negotiate`)."""
        self._era = self.modern_era(version)
        self.protocol_version = version
        self.capabilities = info.capabilities
        self.server_info = info.server_info
        self.instructions = info.instructions
        self._tools = None
        self._transport.set_protocol_version(version)
        self._generation += 1
        if "tools" not in info.capabilities:
            self._warn(f"{self.name}: server does not declare the 'tools' capability; trying anyway")

    def connect_failed(self, exc: TransportError, reason: str | None = None) -> ConnectFailed:
        """The ``ConnectFailed`` for a connection attempt that ended with ``exc`` (see :func:`initialize_failed`)."""
        return self._initialize_failed(exc, reason)

    def _initialize_failed(self, exc: TransportError, reason: str | None = None) -> ConnectFailed:
        broken = self._broken if isinstance(self._broken, TransportError) else None
        return initialize_failed(
            self.name,
            exc,
            reason,
            broken=broken,
            first_invalid=self._stray.first_invalid,
            on_stdout=self._stray.on_stdout,
        )

    async def _reinitialize(self, seen_generation: int) -> None:
        """The server forgot our session (it restarted): run the handshake again. Other requests wait until
        it is done, so none goes out half-way (a server answers those 400 "not initialized"). Raises
        ``NotDelivered`` when the new handshake fails: the request that found the session gone never ran."""
        async with self._init_lock:
            if self._generation != seen_generation:
                return  # another caller already started a fresh session
            self._warn(f"{self.name}: session expired on the server; starting a new one")
            self._ready = trio.Event()
            try:
                # Bounded as a whole (the initialized notification too): requests wait for it.
                with trio.fail_after(2 * self._options.initialize_timeout):
                    pinned = self._options.protocol
                    await self.initialize(pinned if pinned in LEGACY_VERSIONS else None)
            except trio.TooSlowError:
                raise NotDelivered(
                    f"{self.name}: the session expired and a new one could not be started in time"
                ) from None
            except (TransportError, ProtocolError) as exc:
                raise NotDelivered(
                    f"{self.name}: the session expired and a new one could not be started: {exc}"
                ) from exc
            finally:
                self._ready.set()

    async def ping(self) -> None:
        """A request without side effects: does the server answer on this session? (It re-initializes the
        session if the server forgot it.)"""
        await self.request(self._era.ping_method, None, timeout=self._options.initialize_timeout)

    # -- tools ---------------------------------------------------------------------------------------

    @property
    def listed_tools(self) -> list[Tool] | None:
        """The list :meth:`list_tools` returned last, while it is current; None before the first listing and
        after the server said the list changed (or the session was renewed). Never waits: a caller that checks
        every call reads it instead of taking the listing's lock each time."""
        return self._tools

    async def list_tools(self) -> list[Tool]:
        """Every tool, across all pages; cached until the server says the list changed."""
        async with self._tools_lock:
            if self._tools is not None:
                return self._tools
            generation = self._generation
            tools: list[Tool] = []
            cursor: str | None = None
            seen: set[str] = set()
            for _page in range(MAX_TOOL_PAGES):
                params = {"cursor": cursor} if cursor is not None else None
                result = await self.request("tools/list", params, timeout=self._options.initialize_timeout)
                tools.extend(self._page_tools(result))
                next_cursor = self._next_cursor(result)
                if next_cursor is None:
                    break
                if next_cursor in seen:
                    raise MalformedMessage(f"{self.name}: tools/list repeated cursor {next_cursor!r}; stopping")
                seen.add(next_cursor)
                cursor = next_cursor
            else:
                raise MalformedMessage(f"{self.name}: tools/list did not end after {MAX_TOOL_PAGES} pages")
            tools = self._era.screen_tools(tools, lambda text: self._warn(f"{self.name}: {text}"))
            if generation == self._generation:
                self._tools = tools
            return tools

    def _page_tools(self, result: dict[str, Any]) -> list[Tool]:
        raw_tools = result.get("tools")
        if not isinstance(raw_tools, list):
            raise MalformedMessage(f"{self.name}: tools/list result has no 'tools' list")
        return [parse_tool(t) for t in raw_tools]

    def _next_cursor(self, result: dict[str, Any]) -> str | None:
        next_cursor = result.get("nextCursor")
        if next_cursor is not None and not isinstance(next_cursor, str):
            raise MalformedMessage(f"{self.name}: tools/list nextCursor must be a string")
        return next_cursor

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        idle_timeout: float | None = None,
        on_progress: ProgressHandler | None = None,
        before_send: BeforeSend | None = None,
        on_resumed: Callable[[str], None] | None = None,
    ) -> ToolResult:
        """Call a tool once. Returns its result (``is_error`` for a tool failure); raises as the module
        docstring says. Never re-sends a request that may have reached the server."""
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments) if arguments is not None else {}}
        if self._era.needs_tool_list(name) and self._tools is None:
            await self.list_tools()  # a 2026-07-28 call over HTTP mirrors the tool's x-mcp-header parameters
        result = await self.request(
            "tools/call",
            params,
            timeout=timeout,
            idle_timeout=idle_timeout,
            on_progress=on_progress,
            before_send=before_send,
            on_resumed=on_resumed,
            progress=True,
        )
        result = await self.answer_input(
            "tools/call", params, result, timeout=timeout, idle_timeout=idle_timeout, on_progress=on_progress
        )
        result = complete_result("tools/call", result, server=self.name)
        try:
            return parse_tool_result(result)
        except MalformedMessage as exc:
            raise MalformedMessage(f"{self.name}: {exc}") from None

    async def answer_input(
        self,
        method: str,
        params: dict[str, Any],
        result: dict[str, Any],
        *,
        timeout: float | None = None,
        idle_timeout: float | None = None,
        on_progress: ProgressHandler | None = None,
    ) -> dict[str, Any]:
        """``result`` (the answer to ``method`` with ``params``), or when it is a 2026 ``input_required`` one,
        the answer once its questions are answered by the answer policy and the request is sent again
        (:mod:`.input_required`). The request is journaled once (its first dispatch): a round of answers is the
        same call, which the server has not run yet (it asked first), sent again with new ids."""
        if result.get("resultType") != INPUT_REQUIRED:
            return result
        first = [result]

        async def send(again: dict[str, Any]) -> dict[str, Any]:
            if first:
                return first.pop()
            return await self.request(
                method, again, timeout=timeout, idle_timeout=idle_timeout, on_progress=on_progress, progress=True
            )

        return await resolve_input_required(send, params, self._options.answers, on_answer=self.note_answer)

    def follow_progress(self, token: RequestId, handler: ProgressHandler | None) -> None:
        """Route ``notifications/progress`` for ``token`` to ``handler`` after its request ended (a call the
        server took as a task reports progress until the task ends); None stops."""
        if handler is None:
            self._followed.pop(token, None)
        else:
            self._followed[token] = handler

    # -- requests ------------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float | None = None,
        idle_timeout: float | None = None,
        on_progress: ProgressHandler | None = None,
        before_send: BeforeSend | None = None,
        on_resumed: Callable[[str], None] | None = None,
        progress: bool = False,
        handshake: bool = False,
        era: Era | None = None,
        request_id: RequestId | None = None,
    ) -> dict[str, Any]:
        """Send one request and return its result (the raw result object). Raises ``JsonRpcError`` for
        an error response and the transport errors of the module docstring. ``progress`` adds a progress
        token (the request id) to ``_meta``. While the session is being re-initialized, requests wait
        (``handshake``: a request of the handshake itself, which does not). ``era`` stamps the request
        (default: the session's; the negotiation passes the one it tries). In 2026-07-28, an HTTP 4xx whose
        body is a JSON-RPC error raises that error as ``JsonRpcError``. ``request_id``: use this id instead of
        the next one (the era probe uses 0, so every later request keeps the id it had without a probe)."""
        era = era or self._era
        for _attempt in range(MAX_REINITIALIZE + 1):
            if not handshake and method != "initialize" and not self._ready.is_set():
                await self._ready.wait()  # only while re-initializing: a set Event's wait() is a task switch
            if self._broken is not None:
                raise self._closed()
            generation = self._generation
            rid = self._ids.next() if request_id is None else request_id
            tracer = self._options.tracer
            try:
                # Untraced (every request of a run that is not traced): a context that does nothing, no info built.
                with _UNTRACED if tracer is None else tracer(self._request_info(method, rid, params)) as traced:
                    waits = (timeout, idle_timeout, on_progress, on_resumed)
                    traced_params = _with_meta(params, traced.meta)
                    result = await self._send_one(era, rid, method, traced_params, progress, before_send, waits)
                    traced.answered(result)
                    return result
            except SessionExpired as exc:
                if method == "initialize" or handshake:
                    raise  # the handshake under way (it holds the lock) is what failed: no new one from here
                await self._renew(exc, generation, journaled=before_send is not None)
        raise NotDelivered(f"{self.name}: the server keeps forgetting our session; the request was not run")

    async def _send_one(
        self,
        era: Era,
        rid: RequestId,
        method: str,
        params: dict[str, Any] | None,
        progress: bool,
        before_send: BeforeSend | None,
        waits: _Waits,
    ) -> dict[str, Any]:
        """One request: stamped by ``era``, its dispatch journaled first when ``before_send`` says so, sent,
        waited for (``waits``: its timeout, idle timeout, progress and resumption handlers)."""
        request = _outgoing(era, rid, method, params, progress=progress)
        gate = None
        if before_send is not None:
            request = sendable(request)  # written once, before its dispatch is journaled (see .sendable)
            gate = await before_send(rid, rid)
        timeout, idle_timeout, on_progress, on_resumed = waits
        pending = PendingCall(  # its clocks start now, once the dispatch is journaled
            method, timeout=timeout, idle_timeout=idle_timeout, on_progress=on_progress, on_resumed=on_resumed
        )
        try:
            return await self._send_and_wait(request, pending, gate)
        except HTTPStatusError as exc:
            raise _in_era(exc, era, method)  # noqa: B904 - its cause is set there (or it is exc itself)

    def _request_info(self, method: str, rid: RequestId, params: dict[str, Any] | None) -> RequestInfo:
        """What the tracer is told of a request (see :class:`~runner.session.options.RequestInfo`)."""
        session_id = getattr(self._transport, "session_id", None)  # the HTTP transport's, public
        return RequestInfo(
            server=self.name,
            method=method,
            request_id=rid,
            params=params,
            protocol_version=self.protocol_version,
            session_id=session_id if isinstance(session_id, str) else None,
            transport="tcp" if self._http else "pipe",
        )

    async def _renew(self, expired: SessionExpired, generation: int, *, journaled: bool) -> None:
        """The server forgot the session: renew it (once per generation); a journaled call then fails with
        ``expired``: its caller records how this attempt ended and sends it again itself, so every dispatch in
        the journal has an end. Otherwise the request is sent again."""
        await self._reinitialize(generation)
        if journaled:
            raise expired

    # -- what the server sends -------------------------------------------------------------------------

    async def read_loop(self) -> None:
        """Route what the server sends until the connection ends, then fail what still waits. Run once, by
        :func:`open_session`, in the session's nursery."""
        transport = self._transport
        pending = self._pending
        try:
            while True:
                event = await transport.receive()
                if isinstance(event, Response):
                    entry = pending.get(event.id)
                    if entry is None:
                        self._stray.unmatched(event, last_issued=self._ids.last)
                    else:
                        entry.finish(event.result, None)
                elif isinstance(event, Notification):
                    self._on_notification(event)
                elif isinstance(event, ErrorResponse):
                    self._on_error_response(event)
                elif isinstance(event, Request):
                    # Answered in a task of its own: a reader blocked on a full pipe would deadlock.
                    self._nursery.start_soon(self._answer, event)
                else:
                    self._on_transport_event(event)
        except (TransportError, ProtocolError) as exc:
            self._fail_all(exc)

    def _on_transport_event(self, event: RequestLost | StreamResumed | InvalidMessage) -> None:
        """What the transport itself reports about a call (lost, resumed) or an invalid message."""
        if isinstance(event, RequestLost):
            lost = self._pending.get(event.request_id)
            if lost is not None:
                lost.finish(None, event.error)
        elif isinstance(event, StreamResumed):
            resumed = self._pending.get(event.request_id)
            if resumed is not None and resumed.on_resumed is not None:
                resumed.on_resumed(event.last_event_id)
        else:
            self._on_invalid(event)

    def close(self) -> None:
        """Stop accepting calls; calls still waiting fail (``OutcomeUnknown`` if their request went out)."""
        if self._broken is None:
            self._fail_all(NotDelivered(f"{self.name}: session closed"), "session closed")

    @property
    def broken(self) -> McpRunError | None:
        """Why the session can no longer be used (its connection died, or it was closed); None while it can."""
        return self._broken

    async def wait_broken(self) -> McpRunError:
        """Wait until the session can no longer be used (a stdio server exited, the session was closed) and
        return why. A Streamable HTTP session is not broken by a server that went away: its calls fail
        ``NotDelivered`` one by one, and whoever owns the session decides."""
        await self._broken_event.wait()
        assert self._broken is not None
        return self._broken

    def _fail_all(self, exc: McpRunError, what: str = "connection lost") -> None:
        self._broken = exc
        self._broken_event.set()
        self._pending.fail_all(exc, name=self.name, what=what)

    def _on_error_response(self, event: ErrorResponse) -> None:
        entry = self._pending.get(event.id) if event.id is not None else None
        if entry is None:
            self._stray.unmatched(event, last_issued=self._ids.last)
            return
        message = event.message
        if event.code == URL_ELICITATION_REQUIRED:
            message = url_elicitation_text(message, event.data)
        entry.finish(None, JsonRpcError(event.code, message, event.data, method=entry.method))

    def _on_notification(self, event: Notification) -> None:
        method = event.method
        params = event.params or {}
        if method == "notifications/progress":
            self._on_progress(params)
        elif method == "notifications/message":
            if self._options.on_log is not None:
                self._options.on_log(parse_log_message(params), event.related_request_id)
        elif method == "notifications/tools/list_changed":
            self._tools = None

    def _on_progress(self, params: dict[str, Any]) -> None:
        token = params.get("progressToken")
        if not isinstance(token, str | int):
            return
        entry = self._pending.get(token)
        handler = entry.progressed if entry is not None else self._followed.get(token)
        if handler is None:
            return  # progress for a call that ended; harmless
        progress = parse_progress(params)
        if progress is not None:
            handler(progress)  # a followed call: one the server took as a task, its token lives as long

    def _on_invalid(self, event: InvalidMessage) -> None:
        entry = self._pending.get(event.request_id) if event.request_id is not None else None
        self._stray.invalid(event, failed_a_call=entry is not None)
        if entry is not None:
            entry.finish(None, MalformedMessage(f"{self.name}: invalid response to {entry.method}: {event.error}"))

    async def _answer(self, request: Request) -> None:
        if request.method == "ping":
            reply: Response | ErrorResponse = Response(request.id, {})
        else:
            answer = answer_request(self._options.answers, request.method, request.params)
            self.note_answer(answer)
            if answer.result is not None:
                reply = Response(request.id, answer.result)
            else:
                reply = ErrorResponse(request.id, answer.error_code or METHOD_NOT_FOUND, answer.error_message or "")
        try:
            await self._transport.send(reply)
        except McpRunError as exc:
            self._warn(f"{self.name}: could not answer {request.method}: {first_line(exc)}")

    def note_answer(self, answer: Answer) -> None:
        """Log what the server asked and what mcp-run answered (through ``on_log``, logger ``mcp-run``): the
        2025 era's server requests here, the 2026 era's ``input_required`` rounds by whoever runs them."""
        if self._options.on_log is not None:
            text = f"{self.name} asked {answer.summary}"
            self._options.on_log(LogMessage(level=answer.log_level, data=text, logger="mcp-run"), None)

    def _warn(self, text: str) -> None:
        if self._options.on_warning is not None:
            self._options.on_warning(text)


@asynccontextmanager
async def open_session(transport: Transport, options: SessionOptions | None = None) -> AsyncIterator[Session]:
    """Run the handshake on ``transport`` and yield the session; on exit, stop reading. Closing the
    transport itself is its owner's job."""
    with single_error():
        async with trio.open_nursery() as nursery:
            session = Session(transport, options or SessionOptions(), nursery)
            nursery.start_soon(session.read_loop)
            try:
                await negotiate(session)
                yield session
            finally:
                session.close()
                nursery.cancel_scope.cancel()


class _Untraced:
    """The tracing context of a request when nothing traces: no ``_meta`` to add, nothing to tell."""

    __slots__ = ()
    meta: Mapping[str, str] = {}

    def __enter__(self) -> _Untraced:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def answered(self, result: Mapping[str, Any]) -> None:
        return None


_UNTRACED: Final = _Untraced()


def _with_meta(params: dict[str, Any] | None, meta: Mapping[str, str]) -> dict[str, Any] | None:
    """``params`` with ``meta`` added to its ``_meta`` (the caller's own kept); unchanged when ``meta`` is empty."""
    if not meta:
        return params
    own = params.get("_meta") if params is not None else None
    merged = {**own, **meta} if isinstance(own, dict) else dict(meta)
    return {**params, "_meta": merged} if params is not None else {"_meta": merged}


def _with_progress_token(params: dict[str, Any] | None, rid: RequestId) -> dict[str, Any]:
    """``params`` with ``_meta.progressToken`` set to the request id (the caller's other ``_meta`` kept)."""
    own = params.get("_meta") if params is not None else None
    meta = {**own, "progressToken": rid} if isinstance(own, dict) else {"progressToken": rid}
    return {**params, "_meta": meta} if params is not None else {"_meta": meta}


def _outgoing(era: Era, rid: RequestId, method: str, params: dict[str, Any] | None, *, progress: bool) -> Request:
    """The request as ``era`` sends it (its params and HTTP headers stamped; a progress token if asked)."""
    stamped, headers = era.stamp(method, _with_progress_token(params, rid) if progress else params)
    return Request(rid, method, stamped, headers)


def _in_era(exc: HTTPStatusError, era: Era, method: str) -> Exception:
    """The error an HTTP status error raises: in 2026-07-28 a 4xx whose body is a JSON-RPC error is that
    error (caused by the status error); otherwise the status error itself."""
    rpc = exc.rpc_error
    if era.modern and rpc is not None and 400 <= exc.status_code < 500:
        error = modern_error(*rpc, method=method)
        error.__cause__ = exc
        return error
    return exc
