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
or trio cancellation the session sends ``notifications/cancelled`` for that request, tells the transport
that it no longer wants the response (``Transport.abandon``) and stops waiting; a late response is ignored.

``before_send`` is awaited after the request id and progress token are chosen and before a byte is
written: the write-ahead journal records the dispatch there.

What matches nothing is counted (:attr:`Session.stats`) and, the first ``WARN_FIRST`` times of each kind,
shown through ``on_warning`` with the raw text (cut, control characters escaped), then one line saying that
further ones are only counted:

- output that is not JSON-RPC (on stdio, mostly log lines printed to stdout instead of stderr);
- responses whose id matches no request we sent (``"7"`` for our ``7``: ids are matched exactly).

Late responses, to ids we issued and stopped waiting for (a timeout, a cancellation), are expected: counted
only. When ``initialize`` fails or times out after the server wrote something that is not JSON-RPC, the
error quotes the first such line: a server that logs to stdout is the usual reason.
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
    printable,
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
    encode,
)
from runner.protocol.mcp import (
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

__all__ = [
    "BeforeSend",
    "LogHandler",
    "ProgressHandler",
    "Session",
    "SessionOptions",
    "SessionStats",
    "open_session",
]

ProgressHandler = Callable[[Progress], None]
LogHandler = Callable[[LogMessage, "RequestId | None"], None]
BeforeSend = Callable[[RequestId, RequestId], Awaitable[None]]

MAX_TOOL_PAGES: Final = 1000
MAX_REINITIALIZE: Final = 3
CANCEL_NOTIFY_TIMEOUT: Final = 5.0
WARN_FIRST: Final = 3  # of each kind of stray input, how many are shown before they are only counted
_QUOTE_CHARS: Final = 160  # of a stray line shown in a warning or an error


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


@dataclass(frozen=True, slots=True)
class SessionStats:
    """What the server sent that matched nothing, counted since the session started.

    ``invalid_lines``: messages that are not JSON-RPC (on stdio: lines on stdout). ``unmatched_responses``:
    responses and error responses whose id matches no request we ever sent. ``late_responses``: responses to
    requests we stopped waiting for (timeout, cancellation), which are expected and never warned about.
    """

    invalid_lines: int = 0
    unmatched_responses: int = 0
    late_responses: int = 0


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
        self._invalid_lines = 0
        self._invalid_shown = 0  # of those not tied to a pending call (the others fail their call)
        self._first_invalid: bytes | None = None
        self._unmatched_responses = 0
        self._late_responses = 0
        # describe() is "stdio: CMD" for a stdio server: its stray lines were on stdout, which says what to fix.
        self._on_stdout = transport.describe().startswith("stdio:")

    @property
    def name(self) -> str:
        return self._options.name

    @property
    def transport(self) -> Transport:
        return self._transport

    @property
    def stats(self) -> SessionStats:
        """Stray input counted so far (see the module docstring)."""
        return SessionStats(self._invalid_lines, self._unmatched_responses, self._late_responses)

    # -- the handshake ---------------------------------------------------------------------------------

    async def initialize(self) -> None:
        """Run the handshake (again, after a session expired). Raises ``ConnectFailed`` when the server
        cannot be reached or gives no answer within ``initialize_timeout``, ``ProtocolError`` when it answers
        wrongly. These errors do not name the server: whoever shows them does (``server docs: ...``)."""
        params = {
            "protocolVersion": LATEST_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": self._options.client_name, "version": self._options.client_version},
        }
        timeout = self._options.initialize_timeout
        try:
            result = await self.request("initialize", params, timeout=timeout)
        except CallTimeout as exc:
            raise self._initialize_failed(exc, f"no answer within {timeout:g} s") from exc
        except TransportError as exc:
            raise self._initialize_failed(exc) from exc
        version = result.get("protocolVersion")
        if version not in SUPPORTED_PROTOCOL_VERSIONS:
            raise UnsupportedProtocolVersion(LATEST_PROTOCOL_VERSION, str(version))
        capabilities = result.get("capabilities")
        if not isinstance(capabilities, dict):
            raise MalformedMessage("initialize result has no capabilities object")
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

    def _initialize_failed(self, exc: TransportError, reason: str | None = None) -> ConnectFailed:
        """``could not initialize: REASON``, with the server's stderr tail and, when it wrote something that is
        not JSON-RPC, the first such line (the usual cause: a server that logs to stdout)."""
        broken = self._broken if isinstance(self._broken, TransportError) else None
        if reason is None:
            # The connection's own end says it best ("server exited with code 1"), better than what that did
            # to the request ("connection lost after initialize request 1 was sent: ...").
            cause = exc.__cause__
            source = broken or (cause if isinstance(cause, TransportError) else exc)
            reason = _first_line(source).removeprefix(f"{self.name}: ")
        text = f"could not initialize: {reason}"
        if self._first_invalid is not None:
            quoted = _quote(self._first_invalid)
            if self._on_stdout:
                text += (
                    f"; it wrote text that is not JSON-RPC on stdout: {quoted} (an MCP server must write only "
                    "protocol messages on stdout; logs go to stderr)"
                )
            else:
                text += f"; it sent something that is not JSON-RPC: {quoted}"
        stderr = exc.stderr or (broken.stderr if broken is not None else None)
        error = ConnectFailed(text, stderr=stderr, retryable=exc.retryable)
        error.server = self.name
        return error

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
                    await self.initialize()
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
                broken = self._broken
                raise NotDelivered(
                    f"{self.name}: connection is closed: {_first_line(broken)}",
                    stderr=broken.stderr if isinstance(broken, TransportError) else None,
                ) from broken
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
                if method == "initialize" or handshake:
                    raise  # the handshake under way (it holds the lock) is what failed: no new one from here
                await self._reinitialize(generation)
                if before_send is not None:
                    # A journaled call: its caller records how this attempt ended and sends it again itself,
                    # so every dispatch in the journal has an end.
                    raise
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
        """We gave up on ``rid``: tell the server (``notifications/cancelled``), then the transport, which may
        let go of what it holds for that request (an HTTP stream) whether or not the notification went out."""
        try:
            if self._broken is not None:
                return
            with trio.move_on_after(CANCEL_NOTIFY_TIMEOUT):
                try:
                    await self._transport.send(
                        Notification("notifications/cancelled", {"requestId": rid, "reason": reason})
                    )
                except McpRunError as exc:
                    self._warn(f"{self.name}: could not send cancellation for request {rid}: {_first_line(exc)}")
        finally:
            self._transport.abandon(rid)

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
                        self._on_unmatched(event)
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
            self._on_unmatched(event)
            return
        entry.finish(None, JsonRpcError(event.code, event.message, event.data, method=entry.method))

    def _on_unmatched(self, event: Response | ErrorResponse) -> None:
        """A response no pending request waits for: late (an id we issued and gave up on) or unmatched."""
        rid = event.id
        if type(rid) is int and 0 < rid <= self._ids.last:
            self._late_responses += 1  # we stopped waiting for it (timeout, cancellation): expected
            return
        self._unmatched_responses += 1
        count = self._unmatched_responses
        if count > WARN_FIRST + 1:
            return
        if count > WARN_FIRST:
            self._warn(f"{self.name}: more responses that match no request; further ones are only counted")
            return
        if rid is None:
            what = "an error response with a null id"
        else:
            what = f"a response with id {_quote_id(rid)}, which matches no request we sent"
            if isinstance(rid, str) and rid.isdigit() and 0 < int(rid) <= self._ids.last:
                what += f" (ids are matched exactly: we sent the number {int(rid)}, not the string {_quote_id(rid)})"
        self._warn(f"{self.name}: ignored {what}: {_quote(encode(event), quotes=False)}")

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
        self._invalid_lines += 1
        if self._first_invalid is None:
            self._first_invalid = event.raw
        entry = self._pending.get(event.request_id) if event.request_id is not None else None
        if entry is not None:
            entry.finish(None, MalformedMessage(f"{self.name}: invalid response to {entry.method}: {event.error}"))
            return
        self._invalid_shown += 1
        if self._invalid_shown > WARN_FIRST + 1:
            return
        what, further = ("a line on stdout", "lines") if self._on_stdout else ("a message", "messages")
        if self._invalid_shown > WARN_FIRST:
            self._warn(f"{self.name}: more output that is not JSON-RPC; further {further} are only counted")
            return
        reason = "not JSON" if event.error.startswith("not JSON") else event.error
        self._warn(f"{self.name}: ignored {what} that is not JSON-RPC ({reason}): {_quote(event.raw)}")

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


def _quote(raw: bytes, *, quotes: bool = True) -> str:
    """Stray input as a reader can see it: decoded, cut, control characters escaped, in quotes."""
    text = raw.decode(errors="replace")
    cut = len(text) > _QUOTE_CHARS
    shown = printable(text[:_QUOTE_CHARS]) + ("…" if cut else "")
    return f'"{shown}"' if quotes else shown


def _quote_id(rid: RequestId) -> str:
    return _quote(rid.encode()) if isinstance(rid, str) else str(rid)


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
