"""JSON text every sink can take: the journal, ``--json``, ``--output``, a request on the wire.

``json.dumps(..., ensure_ascii=False)`` keeps non-ASCII text readable, but passes on characters that some
sinks cannot take:

- a lone surrogate (``"\\ud800"`` is a valid JSON string, and ``json.loads`` gives it back as one code
  point): UTF-8 cannot encode it, so writing the line raised ``UnicodeEncodeError``;
- DEL, the C1 controls and the bidirectional controls, which reach a terminal raw (JSON escapes only C0).

:func:`dumps` writes those as ``\\uXXXX`` escapes: still valid JSON, read back as the very same string, and
the same text as ``json.dumps(..., ensure_ascii=False)`` for everything else. (They can only stand inside
JSON strings, so escaping them in the finished text is exact.)

:func:`utf8` gives the bytes to hash for a text: its UTF-8, with lone surrogates passed through
(``surrogatepass``), so a hash never raises and the hash of ordinary text is what it always was.

One thing JSON cannot carry: a high surrogate directly followed by a low one, as two code points, is read
back as the one character the pair encodes (``"\\ud83d\\ude00"`` is 😀). Such a string comes from no JSON
text, command line or environment (those give lone low surrogates at most).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = ["ESCAPED", "dumps", "escape", "utf8"]

ESCAPED: Final = re.compile("[\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
"""The characters :func:`escape` writes as ``\\uXXXX`` (besides those ``json.dumps`` escapes itself)."""


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape(text: str) -> str:
    """JSON ``text`` written by ``json.dumps(..., ensure_ascii=False)`` with the characters of :data:`ESCAPED`
    escaped; the same string when there is none."""
    if text.isascii() and "\x7f" not in text:
        return text
    return ESCAPED.sub(_escape, text)


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)``, with :func:`escape` applied."""
    return escape(json.dumps(value, ensure_ascii=False, **options))


def utf8(text: str) -> bytes:
    """The bytes of ``text`` to hash: UTF-8, lone surrogates passed through; never raises."""
    return text.encode("utf-8", "surrogatepass")
