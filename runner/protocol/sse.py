"""Server-sent events (``text/event-stream``), sans-IO: feed bytes as they arrive, get complete events back.

The parser follows h11's shape: no I/O, no clock, whatever the chunking the same events (a property test
feeds it one byte at a time)::

    parser = SSEParser(max_event_bytes=1 << 20)
    for chunk in body:
        for event in parser.feed(chunk):
            ...
    leftover = parser.close()        # the stream ended

It follows the WHATWG event-stream rules with two differences that matter to MCP:

- Every block that carried a field is returned, even one with empty ``data``: an MCP *priming event*
  (an ``id`` and an empty ``data``) must move the reader's resumption cursor although it holds no message.
- ``SSEEvent.id`` is the ``id`` field *of this event* (``None`` when it had none), not the inherited
  last-event-id of the WHATWG model, so events are deduplicated by id exactly. The cursor is the reader's
  to keep.

Limits and errors: an event's ``data`` (its lines and their line ends), or a single unterminated line, over
``max_event_bytes`` raises ``FrameTooLarge`` (a ``ProtocolError``): the buffer never grows past the cap.
An event cut by the end of the stream (no blank line) is discarded, as the standard says: a partial JSON
message is never handed on. An ``id`` holding NUL, a ``retry`` that is not ASCII digits, and unknown
fields are ignored; lines starting with ``:`` are comments (keep-alives).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from runner.errors import FrameTooLarge

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "SSEEvent", "SSEParser"]

DEFAULT_MAX_EVENT_BYTES: Final = 16 * 1024 * 1024

_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM: Final = b"\xef\xbb\xbf"


@dataclass(slots=True, frozen=True)
class SSEEvent:
    """One dispatched event. ``id`` is this event's own ``id`` field (``None`` if it had none);
    ``retry`` is the reconnection time in milliseconds when the block carried a valid one."""

    data: str = ""
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEParser:
    """Incremental ``text/event-stream`` parser: ``feed(bytes) -> [SSEEvent]``, then ``close()``.

    >>> p = SSEParser()
    >>> p.feed(b"id: 1\\ndata: \\n\\ndata: {\\"a\\"")
    [SSEEvent(data='', event='message', id='1', retry=None)]
    >>> p.feed(b":1}\\n\\n")
    [SSEEvent(data='{"a":1}', event='message', id=None, retry=None)]
    """

    __slots__ = ("_buf", "_data", "_data_size", "_event", "_has_field", "_id", "_max", "_retry", "_started")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        if max_event_bytes < 1:
            raise ValueError("max_event_bytes must be positive")
        self._max = max_event_bytes
        self._buf = bytearray()
        self._started = False
        self._reset()

    def _reset(self) -> None:
        self._data: list[str] = []
        self._data_size = 0
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._has_field = False

    def feed(self, data: bytes) -> list[SSEEvent]:
        """Add ``data``; return every event it completed."""
        buf = self._buf
        # What is already buffered holds no line end, except maybe a final \r: scan only the new bytes,
        # so a large event trickling in small reads costs linear time.
        scan = max(0, len(buf) - 1)
        buf += data
        if not self._started:
            if len(buf) < len(_BOM) and _BOM.startswith(bytes(buf)):
                return []  # could still be a byte order mark
            self._started = True
            if buf.startswith(_BOM):
                del buf[: len(_BOM)]
                scan = 0
        events: list[SSEEvent] = []
        start = 0
        while True:
            m = _LINE_END.search(buf, scan)
            if m is None:
                break
            if m.group() == b"\r" and m.end() == len(buf):
                break  # may be the first half of \r\n: wait for the next byte
            self._line(bytes(buf[start : m.start()]), events)
            start = scan = m.end()
        del buf[:start]
        if len(buf) > self._max:
            raise FrameTooLarge.over("a server-sent event", self._max, len(buf), how=" in one line")
        return events

    def close(self) -> list[SSEEvent]:
        """The stream ended: finish a line ended by a lone ``\\r``; an unfinished event is discarded."""
        events: list[SSEEvent] = []
        if self._buf.endswith(b"\r"):
            self._line(bytes(self._buf[:-1]), events)
        self._buf.clear()
        self._reset()
        return events

    def _line(self, raw: bytes, events: list[SSEEvent]) -> None:
        if not raw:
            if self._has_field:
                events.append(SSEEvent("\n".join(self._data), self._event or "message", self._id, self._retry))
            self._reset()
            return
        if raw[0] == 0x3A:  # ":" a comment (keep-alive)
            return
        line = raw.decode("utf-8", errors="replace")
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data_size += len(raw) + 1
            if self._data_size > self._max:
                raise FrameTooLarge.over("a server-sent event", self._max, self._data_size)
            self._data.append(value)
            self._has_field = True
        elif self._field(name, value):
            self._has_field = True

    def _field(self, name: str, value: str) -> bool:
        """Take a field other than ``data``; False for one ignored (unknown, an id with NUL, a retry that is
        not a number), which does not make a block an event."""
        if name == "id":
            if "\0" in value:
                return False  # ignored, as the standard says
            self._id = value
        elif name == "event":
            self._event = value
        elif name == "retry":
            if not value.isascii() or not value.isdigit():
                return False
            self._retry = int(value)
        else:
            return False
        return True
