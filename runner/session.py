"""One MCP session per server, shared by many concurrent callers.

The session owns the handshake, the id multiplexing and the routing of what the server sends; it never
knows the wire (see :mod:`runner.transports.base`)::

    async with open_session(transport, name="docs") as session:
        tools = await session.list_tools()
        result = await session.call_tool("convert", {"path": "a.md"}, timeout=600, idle_timeout=60)

How a call can end (three failure kinds kept apart):

- a ``ToolResult`` -- with ``is_error`` True when the tool ran and reported failure;
- ``ProtocolError`` -- the server answered with a JSON-RPC error (``JsonRpcError``) or broke the protocol;
- ``TransportError`` -- the connection failed. ``NotDelivered`` means the request surely never reached
  the server; ``OutcomeUnknown`` means it was written and its result is lost (``CallTimeout`` when we
  stopped waiting). When the transport dies, every pending call fails at once, each with the kind that
  matches whether its request had been written.

Every call gets a unique progress token (its request id); ``notifications/progress`` for that token goes to
the call's ``on_progress`` and pushes back its idle timeout (never past the hard ``timeout``). On timeout
or trio cancellation the session sends ``notifications/cancelled`` for that request and stops waiting; a
late response is ignored.

``before_send`` is awaited after the request id and progress token are chosen and before a byte is
written: the write-ahead journal records the dispatch there.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final

import trio

from runner import __version__
from runner._trio import single_error
from runner.errors import (
    CallTimeout,
    ConnectFailed,
    JsonRpcError,
    MalformedMessage,
    McpRunError,
    NotDelivered,
    OutcomeUnknown,
    ProtocolError,
    SessionExpired,
    TransportError,
    UnsupportedProtocolVersion,
)
from runner.jsonrpc import (
    METHOD_NOT_FOUND,
    ErrorResponse,
    IdAllocator,
    InvalidMessage,
    Notification,
    Request,
    RequestId,
    Response,
)
from runner.protocol import (
    LATEST_PROTOCOL_VERSION,
    LOG_LEVELS,
    SUPPORTED_PROTOCOL_VERSIONS,
    LogMessage,
    Progress,
    Tool,
    ToolResult,
    parse_log_message,
    parse_progress,
    parse_tool,
    parse_tool_result,
)
from runner.transports.base import RequestLost, StreamResumed, Transport

__all__ = ["BeforeSend", "LogHandler", "ProgressHandler", "Session", "SessionOptions", "open_session"]

ProgressHandler = Callable[[Progress], None]
LogHandler = Callable[[LogMessage, "RequestId | None"], None]
BeforeSend = Callable[[RequestId, RequestId], Awaitable[None]]

MAX_TOOL_PAGES: Final = 1000
MAX_REINITIALIZE: Final = 3
CANCEL_NOTIFY_TIMEOUT: Final = 5.0


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """How a session behaves. ``server_log_level`` is what ``logging/setLevel`` asks of the server (None:
    do not ask); what the console shows is filtered elsewhere. ``initialize_timeout`` bounds the handshake
    and each page of ``tools/list`` (the server's ``connect_timeout``)."""

    name: str = "server"
    server_log_level: str | None = "info"
    initialize_timeout: float = 30.0
    client_name: str = "mcp-run"
    client_version: str = __version__
    on_log: LogHandler | None = None
    on_warning: Callable[[str], None] | None = None


class _Pending:
    """One slot per request id: filled by the reader, awaited by the caller."""

    __slots__ = (
        "done",
        "error",
        "idle",
        "method",
        "on_progress",
        "on_resumed",
        "result",
        "scope",
        "sending",
        "timeout_at",
        "written",
    )

    def __init__(
        self, method: str, on_progress: ProgressHandler | None, on_resumed: Callable[[str], None] | None = None
    ) -> None:
        self.method = method
        self.on_progress = on_progress
        self.on_resumed = on_resumed
        self.done = trio.Event()
        self.result: dict[str, Any] | None = None
        self.error: McpRunError | None = None
        self.written = False
        self.sending = False
        self.scope: trio.CancelScope | None = None
        self.timeout_at = math.inf
        self.idle: float | None = None

    def finish(self, result: dict[str, Any] | None, error: McpRunError | None) -> None:
        if not self.done.is_set():
            self.result = result
            self.error = error
            self.done.set()


class Session:
    """A live MCP session. Create it with :func:`open_session`; everything here is safe to call from many
    tasks at once."""

    def __init__(self, transport: Transport, options: SessionOptions, nursery: trio.Nursery) -> None:
        self._transport = transport
        self._options = options
        self._nursery = nursery
        self._ids = IdAllocator()
        self._pending: dict[RequestId, _Pending] = {}
        self._broken: McpRunError | None = None
        self._broken_event = trio.Event()
        self._tools: list[Tool] | None = None
        self._tools_lock = trio.Lock()
        self._init_lock = trio.Lock()
        self._ready = trio.Event()  # cleared while the session is being re-initialized
        self._ready.set()
        self._generation = 0
        self.protocol_version: str | None = None
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        self.invalid_messages = 0
        self.late_responses = 0

    @property
    def name(self) -> str:
        return self._options.name

    @property
    def transport(self) -> Transport:
        return self._transport

    # -- the handshake ---------------------------------------------------------------------------------

    async def initialize(self) -> None:
        """Run the handshake (again, after a session expired). Raises ``ConnectFailed`` when the server
        cannot be reached, ``ProtocolError`` when it answers wrongly."""
        params = {
            "protocolVersion": LATEST_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": self._options.client_name, "version": self._options.client_version},
        }
        try:
            result = await self.request("initialize", params, timeout=self._options.initialize_timeout)
        except TransportError as exc:
            reason = _first_line(exc.__cause__ if isinstance(exc.__cause__, TransportError) else exc)
            raise ConnectFailed(
                f"{self.name}: could not initialize: {reason}", stderr=exc.stderr, retryable=exc.retryable
            ) from exc
        version = result.get("protocolVersion")
        if version not in SUPPORTED_PROTOCOL_VERSIONS:
            raise UnsupportedProtocolVersion(LATEST_PROTOCOL_VERSION, str(version))
        capabilities = result.get("capabilities")
        if not isinstance(capabilities, dict):
            raise MalformedMessage(f"{self.name}: initialize result has no capabilities object")
        server_info = result.get("serverInfo")
        instructions = result.get("instructions")
        self.protocol_version = version
        self.capabilities = capabilities
        self.server_info = server_info if isinstance(server_info, dict) else {}
        self.instructions = instructions if isinstance(instructions, str) else None
        self._tools = None
        self._transport.set_protocol_version(version)
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
                await self.initialize()
            except (TransportError, ProtocolError) as exc:
                raise NotDelivered(
                    f"{self.name}: the session expired and a new one could not be started: {exc}"
                ) from exc
            finally:
                self._ready.set()

    async def ping(self) -> None:
        """A request without side effects: does the server answer on this session? (It re-initializes the
        session if the server forgot it.)"""
        await self.request("ping", None, timeout=self._options.initialize_timeout)

    # -- tools ---------------------------------------------------------------------------------------

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
                raw_tools = result.get("tools")
                if not isinstance(raw_tools, list):
                    raise MalformedMessage(f"{self.name}: tools/list result has no 'tools' list")
                tools.extend(parse_tool(t) for t in raw_tools)
                next_cursor = result.get("nextCursor")
                if next_cursor is None:
                    break
                if not isinstance(next_cursor, str):
                    raise MalformedMessage(f"{self.name}: tools/list nextCursor must be a string")
                if next_cursor in seen:
                    raise MalformedMessage(f"{self.name}: tools/list repeated cursor {next_cursor!r}; stopping")
                seen.add(next_cursor)
                cursor = next_cursor
            else:
                raise MalformedMessage(f"{self.name}: tools/list did not end after {MAX_TOOL_PAGES} pages")
            if generation == self._generation:
                self._tools = tools
            return tools

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
        try:
            return parse_tool_result(result)
        except MalformedMessage as exc:
            raise MalformedMessage(f"{self.name}: {exc}") from None

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
    ) -> dict[str, Any]:
        """Send one request and return its result (the raw result object). Raises ``JsonRpcError`` for
        an error response and the transport errors of the module docstring. ``progress`` adds a progress
        token (the request id) to ``_meta``. While the session is being re-initialized, requests wait
        (``handshake``: a request of the handshake itself, which does not)."""
        for _attempt in range(MAX_REINITIALIZE + 1):
            if not handshake and method != "initialize":
                await self._ready.wait()
            if self._broken is not None:
                raise NotDelivered(f"{self.name}: connection is closed: {_first_line(self._broken)}")
            generation = self._generation
            rid = self._ids.next()
            if progress:
                meta = {"progressToken": rid}
                params = {**params, "_meta": meta} if params is not None else {"_meta": meta}
            if before_send is not None:
                await before_send(rid, rid)
            try:
                return await self._send_and_wait(
                    rid, method, params, timeout, idle_timeout, _Pending(method, on_progress, on_resumed)
                )
            except SessionExpired:
                if method == "initialize":
                    raise
                await self._reinitialize(generation)
        raise NotDelivered(f"{self.name}: the server keeps forgetting our session; the request was not run")

    async def _send_and_wait(
        self,
        rid: RequestId,
        method: str,
        params: dict[str, Any] | None,
        timeout: float | None,
        idle_timeout: float | None,
        entry: _Pending,
    ) -> dict[str, Any]:
        self._pending[rid] = entry
        now = trio.current_time()
        entry.timeout_at = now + timeout if timeout is not None else math.inf
        entry.idle = idle_timeout
        deadline = entry.timeout_at
        if idle_timeout is not None:
            deadline = min(deadline, now + idle_timeout)
        try:
            if deadline == math.inf:  # nothing can move a deadline that is not there: no scope to keep
                await self._send(Request(rid, method, params), entry)
                await entry.done.wait()
            else:
                # The deadline covers the send too: an HTTP POST returns only once the server sends headers,
                # which a server answering with JSON does when the tool is done.
                with trio.CancelScope(deadline=deadline) as scope:
                    entry.scope = scope
                    await self._send(Request(rid, method, params), entry)
                    await entry.done.wait()
            if not entry.done.is_set():
                hard = trio.current_time() >= entry.timeout_at
                what = f"{timeout:g} s timeout" if hard else f"no progress for {idle_timeout:g} s"
                if method == "initialize":  # never cancelled
                    raise CallTimeout(f"{self.name}: no answer to initialize ({what})")
                await self._notify_cancelled(rid, "timeout")
                raise CallTimeout(f"{self.name}: {method} got no result ({what}); cancellation sent", idle=not hard)
        except trio.Cancelled:
            if entry.written and not entry.done.is_set() and method != "initialize":
                with trio.CancelScope(shield=True):
                    await self._notify_cancelled(rid, "cancelled by the client")
            raise
        finally:
            del self._pending[rid]
        if entry.error is not None:
            raise entry.error
        assert entry.result is not None
        return entry.result

    async def _send(self, request: Request, entry: _Pending) -> None:
        """Write ``request``. While the write is under way, a dying connection does not decide the call's
        fate (see :meth:`_fail_all`): the write's own outcome does."""
        entry.sending = True
        try:
            await self._transport.send(request)
        finally:
            entry.sending = False
        entry.written = True
        if self._broken is not None and not entry.done.is_set():
            reason = _first_line(self._broken)
            error = OutcomeUnknown(
                f"{self.name}: connection lost after {entry.method} request {request.id} was sent: {reason}",
                stderr=self._broken.stderr if isinstance(self._broken, TransportError) else None,
            )
            error.__cause__ = self._broken
            entry.finish(None, error)

    async def _notify_cancelled(self, rid: RequestId, reason: str) -> None:
        if self._broken is not None:
            return
        with trio.move_on_after(CANCEL_NOTIFY_TIMEOUT):
            try:
                await self._transport.send(
                    Notification("notifications/cancelled", {"requestId": rid, "reason": reason})
                )
            except McpRunError as exc:
                self._warn(f"{self.name}: could not send cancellation for request {rid}: {_first_line(exc)}")

    # -- what the server sends -------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        transport = self._transport
        pending = self._pending
        try:
            while True:
                event = await transport.receive()
                if isinstance(event, Response):
                    entry = pending.get(event.id)
                    if entry is None:
                        self.late_responses += 1
                    else:
                        entry.finish(event.result, None)
                elif isinstance(event, Notification):
                    self._on_notification(event)
                elif isinstance(event, ErrorResponse):
                    self._on_error_response(event)
                elif isinstance(event, Request):
                    # Answered in a task of its own: a reader blocked on a full pipe would deadlock.
                    self._nursery.start_soon(self._answer, event)
                elif isinstance(event, RequestLost):
                    lost = pending.get(event.request_id)
                    if lost is not None:
                        lost.finish(None, event.error)
                elif isinstance(event, StreamResumed):
                    resumed = pending.get(event.request_id)
                    if resumed is not None and resumed.on_resumed is not None:
                        resumed.on_resumed(event.last_event_id)
                else:
                    self._on_invalid(event)
        except (TransportError, ProtocolError) as exc:
            self._fail_all(exc)

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
        stderr = exc.stderr if isinstance(exc, TransportError) else None
        reason = _first_line(exc)
        for rid, entry in list(self._pending.items()):
            if entry.sending:
                continue  # decided by its write: NotDelivered if it fails, OutcomeUnknown if it completes
            if entry.written:
                err: McpRunError = OutcomeUnknown(
                    f"{self.name}: {what} after {entry.method} request {rid} was sent: {reason}",
                    stderr=stderr,
                )
            else:
                err = NotDelivered(
                    f"{self.name}: {what} before {entry.method} request {rid} was sent: {reason}",
                    stderr=stderr,
                )
            err.__cause__ = exc
            entry.finish(None, err)

    def _on_error_response(self, event: ErrorResponse) -> None:
        entry = self._pending.get(event.id) if event.id is not None else None
        if entry is None:
            self._warn(f"{self.name}: server error {event.code} not tied to a pending request: {event.message}")
            return
        entry.finish(None, JsonRpcError(event.code, event.message, event.data, method=entry.method))

    def _on_notification(self, event: Notification) -> None:
        method = event.method
        params = event.params or {}
        if method == "notifications/progress":
            token = params.get("progressToken")
            entry = self._pending.get(token) if isinstance(token, str | int) else None
            if entry is None:
                return  # progress for a call that ended; harmless
            progress = parse_progress(params)
            if progress is None:
                return
            if entry.idle is not None and entry.scope is not None:
                entry.scope.deadline = min(entry.timeout_at, trio.current_time() + entry.idle)
            if entry.on_progress is not None:
                entry.on_progress(progress)
        elif method == "notifications/message":
            if self._options.on_log is not None:
                self._options.on_log(parse_log_message(params), event.related_request_id)
        elif method == "notifications/tools/list_changed":
            self._tools = None

    def _on_invalid(self, event: InvalidMessage) -> None:
        self.invalid_messages += 1
        entry = self._pending.get(event.request_id) if event.request_id is not None else None
        if entry is not None:
            entry.finish(None, MalformedMessage(f"{self.name}: invalid response to {entry.method}: {event.error}"))
        else:
            raw = event.raw[:200].decode(errors="replace")
            self._warn(f"{self.name}: ignored invalid message from server ({event.error}): {raw}")

    async def _answer(self, request: Request) -> None:
        if request.method == "ping":
            reply: Response | ErrorResponse = Response(request.id, {})
        else:
            reply = ErrorResponse(request.id, METHOD_NOT_FOUND, f"mcp-run does not support {request.method}")
        try:
            await self._transport.send(reply)
        except McpRunError as exc:
            self._warn(f"{self.name}: could not answer {request.method}: {_first_line(exc)}")

    def _warn(self, text: str) -> None:
        if self._options.on_warning is not None:
            self._options.on_warning(text)


def _first_line(exc: BaseException) -> str:
    return str(exc).split("\n", 1)[0]


def check_log_level(level: str) -> str:
    """``level`` if it is an RFC 5424 level name MCP knows, else ``ValueError``."""
    if level not in LOG_LEVELS:
        raise ValueError(f"unknown log level {level!r}; expected one of {', '.join(LOG_LEVELS)}")
    return level


@asynccontextmanager
async def open_session(transport: Transport, options: SessionOptions | None = None) -> AsyncIterator[Session]:
    """Run the handshake on ``transport`` and yield the session; on exit, stop reading. Closing the
    transport itself is its owner's job."""
    with single_error():
        async with trio.open_nursery() as nursery:
            session = Session(transport, options or SessionOptions(), nursery)
            nursery.start_soon(session._read_loop)
            try:
                await session.initialize()
                yield session
            finally:
                session.close()
                nursery.cancel_scope.cancel()
