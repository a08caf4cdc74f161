"""Newline-delimited framing, sans-IO: feed bytes, get complete lines back.

The buffer is capped: a single message larger than ``max_size`` bytes fails the connection with
``FrameTooLarge`` instead of growing memory without bound. ``\\r\\n`` endings are accepted, blank lines
skipped.
"""

from __future__ import annotations

from typing import Final, NoReturn

from runner.errors import FrameTooLarge

__all__ = ["DEFAULT_MAX_MESSAGE_SIZE", "LineDecoder"]

DEFAULT_MAX_MESSAGE_SIZE: Final = 16 * 1024 * 1024


class LineDecoder:
    """Split a byte stream into lines, whatever the chunking.

    >>> d = LineDecoder()
    >>> d.feed(b'{"a":1}\\n{"b"'), d.feed(b':2}\\n')
    ([b'{"a":1}'], [b'{"b":2}'])
    """

    __slots__ = ("_chunks", "_max_size", "_oversized", "_pending")

    def __init__(self, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        if max_size < 1:
            raise ValueError("max_size must be positive")
        self._max_size = max_size
        # An unterminated line is kept as a list of chunks, joined once its newline arrives, so a large
        # message trickling in small reads costs linear time, not quadratic.
        self._chunks: list[bytes] = []
        self._pending = 0
        self._oversized = 0

    @property
    def pending(self) -> int:
        """Bytes held back waiting for their newline."""
        return self._pending

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return every line it completed (without the newline)."""
        if self._oversized:
            self._too_large(self._oversized)
        if b"\n" not in data:
            self._hold(data)
            return []
        if self._chunks:
            self._chunks.append(data)
            data = b"".join(self._chunks)
            self._chunks.clear()
        parts = data.split(b"\n")
        rest = parts.pop()
        self._pending = len(rest)
        if rest:
            self._chunks.append(rest)
        max_size = self._max_size
        if self._pending > max_size:
            self._too_large(self._pending)
        lines: list[bytes] = []
        for part in parts:
            if part[-1:] == b"\r":
                part = part[:-1]
            if not part:
                continue
            if len(part) > max_size:
                return self._refuse(lines, len(part))
            lines.append(part)
        return lines

    def _hold(self, data: bytes) -> None:
        """Keep a read without a newline: the start, or more, of a line still unterminated."""
        if data:
            self._pending += len(data)
            if self._pending > self._max_size:
                self._too_large(self._pending)
            self._chunks.append(data)

    def _refuse(self, lines: list[bytes], size: int) -> list[bytes]:
        """A line of ``size`` bytes is too large: hand back the good lines read before it (the next feed
        raises), or raise now when there are none."""
        if not lines:
            self._too_large(size)
        self._oversized = size
        self._chunks.clear()
        self._pending = 0
        return lines

    def close(self) -> bytes | None:
        """End of stream: return an unterminated last line, if any (peers may omit the final newline)."""
        rest = b"".join(self._chunks).rstrip(b"\r")
        self._chunks.clear()
        self._pending = 0
        return rest or None

    def _too_large(self, size: int) -> NoReturn:
        self._oversized = 0
        self._chunks.clear()
        self._pending = 0
        raise FrameTooLarge.over("a message from the server", self._max_size, size, how=" without a newline")
