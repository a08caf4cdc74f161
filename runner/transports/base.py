"""The one small interface every transport implements, and the events it hands to the session.

A transport moves JSON-RPC messages; it knows nothing of MCP methods beyond what its wire needs (the
Streamable HTTP transport reads the session id off the ``initialize`` response). Decisions about a call are
the session's: when it gives up on a request (a timeout, a cancellation) it sends ``notifications/cancelled``
itself, then calls ``abandon(request_id)``, so a transport that holds something for that request (an HTTP
stream and its pooled connection) can let it go.

A transport is opened as an async context manager that owns whatever tasks it needs (a stdout reader, one
task per SSE stream) and yields an object with this interface::

    async with open_stdio_transport(params) as transport:
        await transport.send(Request(1, "ping"))
        event = await transport.receive()

Failures are reported in the error tree's terms:

- ``send`` raises ``NotDelivered`` (or its subclass ``SessionExpired``) when the message surely never
  reached the server, ``OutcomeUnknown`` when it may have, and ``HTTPStatusError`` when the server refused
  it.
- ``receive`` returns messages, ``InvalidMessage`` for bad input that is not fatal, ``RequestLost`` when
  the response to one request can no longer arrive (a stream that could not be resumed), and
  ``StreamResumed`` when a dropped stream was resumed; it raises a
  ``TransportError`` (or ``ProtocolError`` for an oversized frame) when the whole connection is gone. That
  error is final: every later ``receive`` raises it again.
- ``abandon`` never fails and reports nothing: a response that still arrives for an abandoned request is
  delivered or dropped as the transport finds convenient (the session counts it as late).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeAlias, runtime_checkable

from runner.errors import NotDelivered, TransportError
from runner.protocol.jsonrpc import InvalidMessage, Message, RequestId

__all__ = ["Gate", "Queued", "RequestLost", "StreamResumed", "Transport", "TransportEvent", "Written"]

# How the write of a queued message ended: called once, by the transport's writer, with the ``NotDelivered``
# error when the message surely did not go out whole, or None when it did.
Written: TypeAlias = Callable[[NotDelivered | None], None]


@dataclass(slots=True, frozen=True)
class RequestLost:
    """The response to ``request_id`` will not arrive on this transport; ``error`` says why."""

    request_id: RequestId
    error: TransportError


@dataclass(slots=True, frozen=True)
class StreamResumed:
    """The stream carrying the response to ``request_id`` dropped and was resumed (Streamable HTTP: a GET
    with ``Last-Event-ID: last_event_id`` was accepted). Informational: the call goes on."""

    request_id: RequestId
    last_event_id: str


TransportEvent: TypeAlias = Message | InvalidMessage | RequestLost | StreamResumed


class Transport(Protocol):
    async def send(self, message: Message, /) -> None:
        """Deliver one message to the server (safe to call from many tasks at once)."""

    async def receive(self) -> TransportEvent:
        """The next event from the server (one task at a time)."""

    def abandon(self, request_id: RequestId, /) -> None:
        """The session no longer wants the response to ``request_id`` (it sent ``notifications/cancelled``):
        stop reading for it and free what it holds, quietly. A no-op where nothing is held per request."""

    def set_protocol_version(self, version: str, /) -> None:
        """Called once ``initialize`` has negotiated ``version`` (HTTP sends it as a header)."""

    def describe(self) -> str:
        """A short human name for the peer: ``stdio: python server.py`` or the URL."""


class Gate(Protocol):
    """What a request waits behind before its first byte is written: its dispatch record being durable (the
    journal's write-ahead rule, :meth:`~runner.engine.journal.writer.EventLog.stage`). ``wait`` raises an
    ``McpRunError`` when the gate can never open (the journal cannot be written): the request is then not
    written at all."""

    def passed(self) -> bool:
        """Open already: nothing to wait for."""
        ...

    async def wait(self) -> None:
        """Wait until it opens."""
        ...


@runtime_checkable
class Queued(Protocol):
    """What a transport whose writes are queued for one writer task offers besides ``send`` (stdio): a request
    handed over without waiting for its write, so that its caller parks once, for the outcome."""

    def queue(self, message: Message, written: Written, gate: Gate | None = None, /) -> Callable[[], bool]:
        """Queue ``message``; ``written`` is told how its write ended (once, unless it is withdrawn). ``gate``:
        the message is not written before it opens (the writer waits, the message stays withdrawable; a gate
        that fails makes the write fail as not delivered). Raises ``NotDelivered`` when the connection is
        already gone. Returns ``withdraw``: it takes the message back
        when the writer has not taken it yet (True: surely not sent, and ``written`` is never called), and does
        nothing once it has (False: it goes out whole)."""
        ...
