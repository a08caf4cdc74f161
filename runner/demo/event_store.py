"""A small in-memory event store, so the demo server (and the test peer) can resume SSE streams.

The official SDK ships only the abstract :class:`mcp.server.streamable_http.EventStore`. With one
configured, every SSE event a server sends carries an ``id:``; a client whose stream broke (or was
closed on purpose with ``ctx.close_sse_stream()``, SEP-1699) reconnects with a GET carrying
``Last-Event-ID`` and the transport replays, through :meth:`replay_events_after`, what that
stream sent after the given event.

Event ids are ``"<sequence>"`` strings from one per-store counter, so they are unique across
streams and ordered. Memory is bounded: the oldest events are dropped beyond ``max_events``;
replaying after a dropped (or unknown) event id returns ``None``, which the transport reports to
the client as an unknown ``Last-Event-ID``.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

__all__ = ["InMemoryEventStore"]


@dataclass(frozen=True, slots=True)
class _StoredEvent:
    stream_id: StreamId
    message: JSONRPCMessage | None  # None: a priming event (no payload, never replayed)


class InMemoryEventStore(EventStore):
    """Keeps the last ``max_events`` events of all streams in memory, in send order."""

    def __init__(self, max_events: int = 10_000) -> None:
        if max_events < 1:
            raise ValueError("max_events must be at least 1")
        self._max_events = max_events
        self._events: OrderedDict[EventId, _StoredEvent] = OrderedDict()
        self._sequence = itertools.count(1)

    # No __len__: the SDK tests the store's truthiness (``if not self._event_store``), and an empty
    # store with a __len__ would read as "no event store" and silently disable resumability.
    @property
    def event_count(self) -> int:
        return len(self._events)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id: EventId = str(next(self._sequence))
        self._events[event_id] = _StoredEvent(stream_id, message)
        while len(self._events) > self._max_events:
            self._events.popitem(last=False)
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        anchor = self._events.get(last_event_id)
        if anchor is None:
            return None
        # The callback awaits, and the server keeps storing events meanwhile: go round again until
        # caught up, so the window in which the SDK's transport has finished replaying but not yet
        # attached the live stream (events stored then are not sent) is as short as it can be.
        cursor = int(last_event_id)
        while True:
            pending = [
                (event_id, event)
                for event_id, event in list(self._events.items())
                if int(event_id) > cursor and event.stream_id == anchor.stream_id
            ]
            if not pending:
                return anchor.stream_id
            for event_id, event in pending:
                cursor = int(event_id)
                if event.message is not None:
                    await send_callback(EventMessage(event.message, event_id))
