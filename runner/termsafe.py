"""Text from servers made safe to show on a terminal or in a plain log line.

A server's text (a result, a tool error, a log message, a tool's description, its stderr) can hold control
characters. On a terminal, ``ESC`` starts a sequence the terminal obeys: ``ESC ] 0 ; title BEL`` sets the
window title, ``ESC [ 2 J`` clears the screen; ``\\r`` and backspace overwrite what a line said. Every
place that shows such text to a person (stderr during a run, ``show``, ``logs``, ``call``, ``tools``)
passes it through :func:`terminal` last, after secrets were masked in the original text.

:func:`terminal` shows these characters as visible escapes instead of sending them:

- C0 controls but tab and newline (``\\x00``-``\\x1f``: ``\\x1b``, ``\\r``, ``\\x07``...), DEL (``\\x7f``) and
  the C1 controls (``\\x80``-``\\x9f``; ``\\x9b`` is a one-character CSI);
- lone surrogates (``\\ud800``: a JSON string can hold one, no terminal or UTF-8 file can);
- the bidirectional embeddings, overrides and isolates (``\\u202e``), which reorder what a line seems to say.

:func:`encodable` is for text written as it is to a pipe or a file (``call``'s result when stdout is not a
terminal): only lone surrogates, which UTF-8 cannot encode, become escapes.

Tabs and newlines stay: they cannot move the cursor anywhere a line break cannot. The journal and ``--json``
keep the original text (:mod:`runner.jsontext` writes it as JSON escapes, which are safe).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["UNSAFE", "encodable", "terminal"]

UNSAFE: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
"""The characters :func:`terminal` escapes."""

_NAMED: Final = {"\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text: str) -> str:
    """``text`` with every character of :data:`UNSAFE` shown as an escape (``\\x1b``, ``\\r``, ``\\x9b``,
    ``\\ud800``); the same string when there is none."""
    if text.isascii() and text.isprintable():
        return text
    return UNSAFE.sub(_escape, text)


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with its lone surrogates (which no UTF-8 stream can take) shown as escapes (``\\ud800``), and
    nothing else changed."""
    if text.isascii():
        return text
    return _SURROGATE.sub(_escape, text)
