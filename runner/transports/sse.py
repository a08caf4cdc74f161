"""Server-sent events for the Streamable HTTP transport: a sans-IO parser and the resumption budget.

``SSEParser`` is fed bytes as they arrive and hands back complete events, whatever the chunking (a
property test feeds it one byte at a time). It follows the WHATWG event-stream rules with two
differences that matter to MCP:

- Every block that carried a field is returned, even one with empty ``data``: an MCP *priming event*
  (an ``id`` and an empty ``data``) must move our resumption cursor although it holds no message.
- ``SSEEvent.id`` is the ``id`` field *of this event* (``None`` when it had none), not the
  inherited last-event-id of the WHATWG model, so events can be deduplicated by id exactly. The
  stream's cursor is kept by the caller.

Buffers are capped: an event (or an unterminated line) over ``max_event_bytes`` raises
``FrameTooLarge`` instead of growing memory. An event cut by the end of the stream (no blank line) is
discarded, as the standard says: a partial JSON message is never handed on.

``ResumeBudget`` is the policy for reconnecting a dropped stream: the first reconnect waits exactly
the server's ``retry`` interval (no jitter), later ones back off exponentially with jitter, and the
whole outage is bounded in attempts and in time (trio's clock, so tests run on a virtual one).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import trio

from runner.errors import FrameTooLarge

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "ResumeBudget", "SSEEvent", "SSEParser"]

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
            raise FrameTooLarge(f"server-sent event line over {self._max} bytes")
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
                raise FrameTooLarge(f"server-sent event over {self._max} bytes")
            self._data.append(value)
        elif name == "id":
            if "\0" in value:
                return  # ignored, as the standard says
            self._id = value
        elif name == "event":
            self._event = value
        elif name == "retry":
            if not value.isascii() or not value.isdigit():
                return
            self._retry = int(value)
        else:
            return  # unknown field: ignored, and does not make a block an event
        self._has_field = True


class ResumeBudget:
    """How long to wait before each reconnect of one dropped stream, and when to give up.

    An *outage* starts when a stream ends or drops before its response. Reconnect ``n`` (from 0) waits
    ``base * 2**n`` seconds, capped at ``max_delay``, where ``base`` is the server's last ``retry:``
    (or ``default_retry_ms``); reconnect 0 waits exactly ``base``, later ones add up to ``jitter``
    seconds at random. The outage is over budget after ``attempts`` reconnects, or when the next wait
    would end past ``timeout`` seconds after the outage began. ``progress()`` (a reconnect that brought
    new events) starts a fresh outage: a server that closes its connections on purpose every so often
    (SEP-1699 polling) can keep a long call alive indefinitely, as long as each reconnect gets somewhere.
    """

    __slots__ = ("_attempt", "_deadline", "attempts", "default_retry_ms", "jitter", "max_delay", "rng", "timeout")

    def __init__(
        self,
        *,
        attempts: int,
        timeout: float,
        default_retry_ms: int,
        max_delay: float,
        jitter: float,
        rng: Callable[[float, float], float] = random.uniform,
    ) -> None:
        self.attempts = attempts
        self.timeout = timeout
        self.default_retry_ms = default_retry_ms
        self.max_delay = max_delay
        self.jitter = jitter
        self.rng = rng
        self._attempt = 0
        self._deadline = trio.current_time() + timeout

    @property
    def attempt(self) -> int:
        """Reconnects made in the current outage."""
        return self._attempt

    def progress(self) -> None:
        """The last reconnect delivered new events: the next drop starts a fresh outage."""
        self._attempt = 0
        self._deadline = trio.current_time() + self.timeout

    def next_delay(self, retry_ms: int | None) -> float | None:
        """Seconds to wait before the next reconnect, or ``None`` when the budget is spent.

        Counts the reconnect: call it once per GET about to be made."""
        if self._attempt >= self.attempts:
            return None
        base = (retry_ms if retry_ms is not None else self.default_retry_ms) / 1000
        delay = min(base * 2.0**self._attempt, max(self.max_delay, base))
        if self._attempt > 0 and self.jitter > 0:
            delay += self.rng(0.0, self.jitter)
        if trio.current_time() + delay > self._deadline:
            return None
        self._attempt += 1
        return delay

    def remaining(self) -> float:
        """Seconds left in the current outage (never negative)."""
        return max(0.0, self._deadline - trio.current_time())
