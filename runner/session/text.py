"""How the session shows what went wrong: an error's first line, and input from the server quoted safely."""

from __future__ import annotations

from typing import Final

from runner.errors import first_line, printable
from runner.protocol.jsonrpc import RequestId
from runner.quoting import masked

__all__ = ["QUOTE_CHARS", "first_line", "quote", "quote_id"]

QUOTE_CHARS: Final = 160  # of a stray line shown in a warning or an error


def quote(raw: bytes, *, quotes: bool = True) -> str:
    """Stray input as a reader can see it: decoded, masked (a server may echo a secret), cut, control characters
    escaped, in quotes."""
    text = masked(raw.decode(errors="replace"))
    cut = len(text) > QUOTE_CHARS
    shown = printable(text[:QUOTE_CHARS]) + ("…" if cut else "")
    return f'"{shown}"' if quotes else shown


def quote_id(rid: RequestId) -> str:
    """A request id as sent: a string in quotes (``"7"``), a number bare (``7``)."""
    return quote(rid.encode()) if isinstance(rid, str) else str(rid)
