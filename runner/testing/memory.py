"""An in-memory transport pair for tests: a client end that implements ``Transport`` and a server end a
scripted fake drives.

The server end can break the connection (``break_connection``), which makes the client's ``receive``
raise and its ``send`` fail, so session tests can reproduce a dying server without processes. The client end
records what it was asked to do: ``sent`` (every message, in order), ``abandoned`` (the request ids the
session gave up on) and ``protocol_version``. With ``queued=True`` the client end also queues requests, as
stdio's does (``runner.transports.base.Queued``): a writer task hands each queued message to ``send`` in order,
so a test that replaces ``send`` slows down or fails the write of queued messages too.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import trio

from runner._trio import single_error
from runner.errors import McpRunError, NotDelivered, TransportError
from runner.protocol.jsonrpc import Message, RequestId
from runner.transports.base import Gate, TransportEvent, Written

__all__ = ["MemoryClientTransport", "MemoryServerEnd", "QueuedMemoryClientTransport", "memory_transport_pair"]


class MemoryClientTransport:
    def __init__(
        self,
        outgoing: trio.MemorySendChannel[Message],
        incoming: trio.MemoryReceiveChannel[TransportEvent],
        description: str = "memory",
    ) -> None:
        self._outgoing = outgoing
        self._incoming = incoming
        self._description = description
        self.broken: TransportError | None = None
        self.protocol_version: str | None = None
        self.sent: list[Message] = []
        self.abandoned: list[RequestId] = []  # what the session said it no longer waits for, in order
        self._prepare()

    def _prepare(self) -> None:
        """A subclass's own state, set up at the end of ``__init__`` (this class has none)."""

    async def send(self, message: Message, /) -> None:
        if self.broken is not None:
            raise NotDelivered(f"connection is closed: {self.broken}")
        self.sent.append(message)
        try:
            await self._outgoing.send(message)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise NotDelivered("the fake server has gone away") from exc

    async def receive(self) -> TransportEvent:
        if self.broken is not None:
            raise self.broken
        try:
            return await self._incoming.receive()
        except trio.EndOfChannel:
            self.broken = self.broken or TransportError("the fake server closed the connection")
            raise self.broken from None

    def abandon(self, request_id: RequestId, /) -> None:
        self.abandoned.append(request_id)

    def set_protocol_version(self, version: str, /) -> None:
        self.protocol_version = version

    def describe(self) -> str:
        return self._description


class QueuedMemoryClientTransport(MemoryClientTransport):
    """A client end that also queues messages (see the module docstring); ``write_queued`` is its writer task."""

    def _prepare(self) -> None:
        self._queued: deque[tuple[Message, Written, Gate | None]] = deque()
        self._wake = trio.Event()
        self._writer_done = False

    def queue(self, message: Message, written: Written, gate: Gate | None = None, /) -> Callable[[], bool]:
        if self.broken is not None:
            raise NotDelivered(f"connection is closed: {self.broken}")
        if self._writer_done:
            raise NotDelivered("connection is closed: the transport is closed")
        slot = (message, written, gate)
        self._queued.append(slot)
        self._wake.set()

        def withdraw() -> bool:
            if any(queued is slot for queued in self._queued):
                self._queued.remove(slot)
                return True
            return False

        return withdraw

    async def write_queued(self) -> None:
        """The writer task. Unlike stdio's, it does not order what ``send`` writes directly (a notification)
        after what was queued before it."""
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                while self._queued:
                    slot = self._queued[0]
                    message, written, gate = slot
                    if gate is not None and not gate.passed():
                        try:
                            await gate.wait()  # it stays queued (withdrawable) meanwhile
                        except McpRunError as exc:
                            if self._queued and self._queued[0] is slot:
                                self._queued.popleft()
                                written(NotDelivered(f"not written: {exc}"))
                            continue
                        if not self._queued or self._queued[0] is not slot:
                            continue  # withdrawn while it waited
                    self._queued.popleft()
                    try:
                        await self.send(message)
                    except NotDelivered as exc:
                        written(exc)
                    else:
                        written(None)
        finally:  # the pair is closing: what is still queued was never written, and is told so
            self._writer_done = True
            while self._queued:
                _message, written, _gate = self._queued.popleft()
                written(NotDelivered("cannot write to the fake server: the transport is closed"))


class MemoryServerEnd:
    """What a scripted fake server holds: receive what the client sent, send events back."""

    def __init__(
        self,
        incoming: trio.MemoryReceiveChannel[Message],
        outgoing: trio.MemorySendChannel[TransportEvent],
        client: MemoryClientTransport,
    ) -> None:
        self.incoming = incoming
        self.outgoing = outgoing
        self._client = client

    async def receive(self) -> Message:
        return await self.incoming.receive()

    async def send(self, event: TransportEvent) -> None:
        await self.outgoing.send(event)

    def break_connection(self, error: TransportError | None = None) -> None:
        """The connection dies: the client's ``receive`` raises ``error``."""
        self._client.broken = error or TransportError("connection to the fake server broke")
        self.outgoing.close()
        self.incoming.close()


@asynccontextmanager
async def memory_transport_pair(
    description: str = "memory", *, queued: bool = False
) -> AsyncIterator[tuple[MemoryClientTransport, MemoryServerEnd]]:
    """A connected pair; ``description`` is what the client's ``describe()`` says (``"stdio: cmd"`` to pass
    for a stdio server); ``queued``: the client end is a :class:`QueuedMemoryClientTransport`."""
    to_server_send, to_server_recv = trio.open_memory_channel[Message](math.inf)
    to_client_send, to_client_recv = trio.open_memory_channel[TransportEvent](math.inf)
    kind = QueuedMemoryClientTransport if queued else MemoryClientTransport
    client = kind(to_server_send, to_client_recv, description)
    server = MemoryServerEnd(to_server_recv, to_client_send, client)
    try:
        if isinstance(client, QueuedMemoryClientTransport):
            with single_error():  # what the body raises comes out as itself, not in a group
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(client.write_queued)
                    yield client, server
                    nursery.cancel_scope.cancel()
        else:
            yield client, server
    finally:
        to_server_send.close()
        to_client_send.close()
