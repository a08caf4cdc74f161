"""One MCP session per server, shared by many concurrent callers.

The session owns the handshake, the id multiplexing and the routing of what the server sends; it never
knows the wire (see :mod:`runner.transports.base`)::

    async with open_session(transport, SessionOptions(name="docs")) as session:
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
shown through ``on_warning`` (see :mod:`.stray`). When ``initialize`` fails or times out after the server
wrote something that is not JSON-RPC, the error quotes the first such line: a server that logs to stdout is
the usual reason.

The protocol era (2025's ``initialize`` handshake, or the stateless 2026-07-28) is chosen when the session
opens (:mod:`.negotiate`); what differs between the eras is one object, the session's :class:`.era.Era`.

The package, one idea per module: :mod:`.options` (``SessionOptions`` and the callbacks' types),
:mod:`.handshake` (the handshake's pure parts and its error text), :mod:`.era` (how requests look in each
era), :mod:`.negotiate` (choosing the era), :mod:`.results` (``resultType``: complete, or refused clearly),
:mod:`.pending` (the calls awaiting a response and their write state), :mod:`.stray` (``SessionStats``: what
matched nothing), :mod:`.text` (quoting),
:mod:`.answers` (what a server's own requests get: elicitation, roots, sampling), :mod:`.input_required` (the
2026 multi-round-trip loop), :mod:`.session` (``Session`` and ``open_session``).
"""

from __future__ import annotations

from runner.session.answers import AnswerPolicy, ElicitationPolicy, Root
from runner.session.input_required import resolve_input_required
from runner.session.options import BeforeSend, Gate, LogHandler, ProgressHandler, SessionOptions
from runner.session.session import Session, open_session
from runner.session.stray import WARN_FIRST, SessionStats

__all__ = [
    "WARN_FIRST",
    "AnswerPolicy",
    "BeforeSend",
    "ElicitationPolicy",
    "Gate",
    "LogHandler",
    "ProgressHandler",
    "Root",
    "Session",
    "SessionOptions",
    "SessionStats",
    "open_session",
    "resolve_input_required",
]
