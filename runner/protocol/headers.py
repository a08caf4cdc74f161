"""The HTTP headers of the 2026-07-28 wire that mirror the request body (pure, no I/O).

Streamable HTTP in 2026-07-28 repeats parts of every request in headers, so intermediaries can route without
reading the body: ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` (for ``tools/call``,
``resources/read``, ``prompts/get``), and one ``Mcp-Param-<Name>`` for each tool parameter the tool's input
schema marks with ``x-mcp-header``.

- :func:`encode_header_value`: a value that is not plain visible ASCII (non-ASCII, control characters, tabs,
  leading or trailing spaces, or a value that looks like the sentinel itself) is sent as
  ``=?base64?<base64 of its UTF-8>?=``; anything else as it is. :func:`decode_header_value` is its inverse.
- :func:`header_marks`: the ``x-mcp-header`` markings of one input schema, checked as the revision says
  (a non-empty HTTP token, unique ignoring case, on a string, integer or boolean property reached from the
  root through ``properties`` only). A marking anywhere else, or a bad one, raises ``InvalidHeaderMarking``:
  the client drops that tool from its list.
- :func:`param_headers`: the ``Mcp-Param-*`` headers of one call's arguments (a missing or null value sends
  no header).
- :func:`header_value_problem`: why a header's value (one the user gave: a workflow's ``headers:``,
  ``--header``) cannot be sent as it is: it is not ASCII. Those are sent as given, never encoded.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "MAX_SAFE_INTEGER",
    "NAME_BEARING",
    "HeaderMark",
    "InvalidHeaderMarking",
    "decode_header_value",
    "encode_header_value",
    "header_marks",
    "header_text",
    "header_value_problem",
    "param_headers",
]

NAME_BEARING: Final[Mapping[str, str]] = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}
"""The methods whose ``Mcp-Name`` header mirrors a param, and which param."""

MAX_SAFE_INTEGER: Final = 2**53 - 1
_PREFIX: Final = "=?base64?"
_SUFFIX: Final = "?="
_PLAIN = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")  # visible ASCII, inner spaces, no edge spaces
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 tchar
_PRIMITIVE: Final = frozenset({"string", "integer", "boolean"})
MARK: Final = "x-mcp-header"


def _looks_encoded(value: str) -> bool:
    return value.startswith(_PREFIX) and value.endswith(_SUFFIX) and len(value) >= len(_PREFIX) + len(_SUFFIX)


def encode_header_value(value: str) -> str:
    """``value`` as a header value: as it is when it is plain visible ASCII without edge spaces (and does not
    look like the sentinel), else ``=?base64?...?=``.

    >>> encode_header_value("us-west1")
    'us-west1'
    >>> encode_header_value(" padded ")
    '=?base64?IHBhZGRlZCA=?='
    """
    if _PLAIN.fullmatch(value) and not _looks_encoded(value):
        return value
    return _PREFIX + base64.b64encode(value.encode("utf-8", errors="surrogatepass")).decode("ascii") + _SUFFIX


def decode_header_value(value: str) -> str | None:
    """The inverse of :func:`encode_header_value`; ``None`` for a sentinel whose content is not base64 of
    UTF-8."""
    if not _looks_encoded(value):
        return value
    inner = value[len(_PREFIX) : len(value) - len(_SUFFIX)]
    try:
        return base64.b64decode(inner.encode("ascii"), validate=True).decode("utf-8", errors="surrogatepass")
    except (binascii.Error, UnicodeError, ValueError):
        return None


class InvalidHeaderMarking(ValueError):
    """A tool's ``x-mcp-header`` markings break the revision's rules; the text says which and why."""


@dataclass(frozen=True, slots=True)
class HeaderMark:
    """One marked parameter: the header is ``Mcp-Param-<name>``, its value the argument at ``path``."""

    name: str
    path: tuple[str, ...]
    type: str

    @property
    def header(self) -> str:
        return f"Mcp-Param-{self.name}"


def header_marks(schema: Mapping[str, Any]) -> tuple[HeaderMark, ...]:
    """Every ``x-mcp-header`` marking of the input schema ``schema``; raises ``InvalidHeaderMarking`` for
    one that breaks a rule (see the module docstring)."""
    marks: list[HeaderMark] = []
    _walk(schema, (), reachable=True, marks=marks)
    seen: dict[str, str] = {}
    for mark in marks:
        key = mark.name.lower()
        if key in seen:
            raise InvalidHeaderMarking(
                f"x-mcp-header {mark.name!r} is used twice (also by {seen[key]!r}; names are compared ignoring case)"
            )
        seen[key] = ".".join(mark.path)
    return tuple(marks)


def _walk(node: Any, path: tuple[str, ...], *, reachable: bool, marks: list[HeaderMark]) -> None:
    if isinstance(node, list):
        for child in node:
            _walk(child, path, reachable=False, marks=marks)
        return
    if not isinstance(node, Mapping):
        return
    if MARK in node:
        marks.append(_reachable_mark(node, path, reachable=reachable))
    for key, child in node.items():
        if key == "properties" and isinstance(child, Mapping):
            for name, sub in child.items():
                _walk(sub, (*path, str(name)), reachable=reachable, marks=marks)
        elif isinstance(child, Mapping | list):
            # items, oneOf/anyOf/allOf/not, if/then/else, $defs...: a marking below is not statically reachable
            _walk(child, path, reachable=False, marks=marks)


def _reachable_mark(node: Mapping[str, Any], path: tuple[str, ...], *, reachable: bool) -> HeaderMark:
    """The marking on ``node``, which must be a parameter reached from the root through ``properties``."""
    if not reachable:
        where = ".".join(path) or "(root)"
        raise InvalidHeaderMarking(
            f"x-mcp-header under {where!r} is not reached from the root through 'properties' alone"
        )
    if not path:
        raise InvalidHeaderMarking("x-mcp-header on the schema root, which is not a parameter")
    return _mark(node, path)


def _mark(node: Mapping[str, Any], path: tuple[str, ...]) -> HeaderMark:
    where = ".".join(path)
    name = node[MARK]
    if not isinstance(name, str) or not name:
        raise InvalidHeaderMarking(f"x-mcp-header on {where!r} must be a non-empty string, got {name!r:.60}")
    if not _TOKEN.fullmatch(name):
        raise InvalidHeaderMarking(f"x-mcp-header {name!r:.60} on {where!r} is not an HTTP header name token")
    kind = node.get("type")
    if kind not in _PRIMITIVE:
        raise InvalidHeaderMarking(
            f"x-mcp-header {name!r} on {where!r}: the parameter must be a string, integer or boolean, not {kind!r:.60}"
        )
    return HeaderMark(name=name, path=path, type=str(kind))


def _value_at(arguments: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = arguments
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def header_text(value: Any) -> str | None:
    """A parameter value as a header's text: strings as they are, integers in decimal (within JavaScript's
    safe range), booleans as ``true``/``false``; ``None`` for null, a missing value or another type."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else None
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return str(int(value))
    if isinstance(value, str):
        return value
    return None


def param_headers(marks: tuple[HeaderMark, ...], arguments: Mapping[str, Any]) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers of a call with ``arguments`` to a tool marked ``marks``."""
    headers: dict[str, str] = {}
    for mark in marks:
        text = header_text(_value_at(arguments, mark.path))
        if text is not None:
            headers[mark.header] = encode_header_value(text)
    return headers


def header_value_problem(name: str, value: str, *, quote: bool = False) -> str | None:
    """Why ``value`` cannot be the value of header ``name`` (its first character that is not ASCII), or None.
    ``quote``: name the character itself (a value written in the workflow); else only its code point and
    position, since a rendered value may hold a secret."""
    if value.isascii():
        return None
    index, char = next((i, c) for i, c in enumerate(value) if not c.isascii())
    shown = f"{char!r} (U+{ord(char):04X})" if quote else f"U+{ord(char):04X}"
    return f"the value of header {name!r} holds {shown} at character {index + 1}, which is not ASCII"
