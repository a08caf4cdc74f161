"""What mcp-run answers when a server asks the client something, with no person to ask. Pure: no I/O.

A server may ask its client for input: ``elicitation/create`` (fill in a form), ``roots/list`` (which
folders may I work in?) and ``sampling/createMessage`` (run this prompt through your language model). In
the 2025 era these are JSON-RPC requests from the server; in 2026-07-28 they come inside an
``input_required`` result (:mod:`.input_required`). Either way one :class:`AnswerPolicy` decides, and
:func:`answer_request` returns the answer and a line that says what was asked and what was answered
(the session logs every one of them: a user must be able to see that a server asked).

The policy, row by row::

    request                       policy                       answer
    ----------------------------  ---------------------------  --------------------------------------------
    elicitation/create (form)     decline (default)            {"action": "decline"}
                                  defaults                     {"action": "accept", "content": DEFAULTS}
                                                               when every required field has a valid
                                                               default (SEP-1034); else decline, naming
                                                               the field
    elicitation/create (url)      any                          {"action": "decline"}; the line shows the URL
                                                               (it is never opened)
    roots/list                    roots: [...]                 {"roots": [{"uri": ..., "name": ...}]}
                                  none configured (default)    refused: -32601 (not declared either)
    sampling/createMessage        any                          refused: -32601, "mcp-run has no model"
    anything else                 any                          refused: -32601

DEFAULTS holds every field of the requested schema whose ``default`` fits its type: a string (for a
single-select enum, one of its values), a number, an integer, a boolean, a list of allowed strings for a
multi-select (``type: array``). A default that does not fit is ignored, as if there were none.
"""

from __future__ import annotations

import enum
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeGuard
from urllib.parse import quote

from runner.protocol.jsonrpc import METHOD_NOT_FOUND
from runner.quoting import cut

__all__ = [
    "ELICITATION_POLICIES",
    "Answer",
    "AnswerPolicy",
    "ElicitationPolicy",
    "Root",
    "answer_request",
    "elicitation_defaults",
    "make_policy",
    "roots_from_config",
    "url_elicitation_text",
]


class ElicitationPolicy(enum.Enum):
    """How a form elicitation is answered."""

    DECLINE = "decline"
    """Always decline (the default: nobody is there to fill the form in)."""
    DEFAULTS = "defaults"
    """Accept with the schema's defaults when every required field has one; else decline."""


ELICITATION_POLICIES: Final = tuple(p.value for p in ElicitationPolicy)


@dataclass(frozen=True, slots=True)
class Root:
    """One root offered to a server: a URI (``file:///...`` for a folder) and an optional name."""

    uri: str
    name: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"uri": self.uri} if self.name is None else {"uri": self.uri, "name": self.name}


@dataclass(frozen=True, slots=True)
class AnswerPolicy:
    """What mcp-run answers a server's questions with (see the module docstring)."""

    elicitation: ElicitationPolicy = ElicitationPolicy.DECLINE
    roots: tuple[Root, ...] = field(default=())

    def client_capabilities(self) -> dict[str, Any]:
        """The capabilities to declare: only what this policy honours. ``elicitation`` (form mode only)
        when it may accept; ``roots`` when some are configured. Never ``sampling``."""
        capabilities: dict[str, Any] = {}
        if self.elicitation is ElicitationPolicy.DEFAULTS:
            capabilities["elicitation"] = {"form": {}}
        if self.roots:
            capabilities["roots"] = {}
        return capabilities


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer to one request: a ``result``, or an ``error_code`` and ``error_message``; ``summary`` is
    one line for the log: what was asked, and what mcp-run answered."""

    method: str
    summary: str
    result: dict[str, Any] | None = None
    error_code: int | None = None
    error_message: str | None = None

    @property
    def refused(self) -> bool:
        """The request got an error: it was not answered at all."""
        return self.result is None

    @property
    def log_level(self) -> str:
        """``notice`` for an accepted elicitation and for roots; ``warning`` for what was declined or refused
        (the tool that asked may fail because of it, so the console shows it by default)."""
        if self.result is None or self.result.get("action") == "decline":
            return "warning"
        return "notice"


NO_ROOTS: Final = "no roots are configured for this server (roots: in the workflow)"
_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def roots_from_config(entries: list[str] | tuple[str, ...], base: str) -> tuple[Root, ...]:
    """Roots from a workflow's ``roots:``: a URI (``file:///data``, anything with a scheme) as it is; a path
    relative to ``base`` (the workflow's folder), or absolute, as a ``file://`` URI. Named after their last
    path segment. Nothing is read from the disk: a root need not exist yet."""
    roots: list[Root] = []
    for entry in entries:
        if _SCHEME.match(entry) and not os.path.isabs(entry):
            name = entry.rstrip("/").rsplit("/", 1)[-1] or None
            roots.append(Root(entry, name))
            continue
        path = os.path.normpath(os.path.join(base, entry))
        roots.append(Root("file://" + _quote_path(path), os.path.basename(path) or None))
    return tuple(roots)


def _quote_path(path: str) -> str:
    return quote(path, safe="/")


def make_policy(elicitation: str | None, roots: tuple[Root, ...] = ()) -> AnswerPolicy:
    """The policy of one server: ``elicitation`` is ``decline``, ``defaults`` or None (the default, decline)."""
    mode = ElicitationPolicy(elicitation) if elicitation is not None else ElicitationPolicy.DECLINE
    return AnswerPolicy(elicitation=mode, roots=roots)


URL_ELICITATION_REQUIRED: Final = -32042
"""2025-11-25: the tool needs a person to visit a URL first (``data.elicitations``)."""


def url_elicitation_text(message: str, data: Any) -> str:
    """The text of a -32042 error: the server's message and every URL it wants a person to open, and what to
    do (mcp-run never opens a URL). A ``data`` that cannot be read gives the message alone."""
    shown: list[str] = []
    elicitations = data.get("elicitations") if isinstance(data, dict) else None
    for entry in elicitations if isinstance(elicitations, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("url"), str):
            why = entry.get("message")
            shown.append(_quote(entry["url"]) + (f" ({_quote(why)})" if isinstance(why, str) else ""))
    if not shown:
        return message
    return (
        f"{message}; a person must open {', '.join(shown)} (mcp-run never opens URLs), then run again "
        "with --retry-failed"
    )


SAMPLING_REFUSED: Final = "mcp-run has no language model: sampling/createMessage is refused"
_MAX_QUOTE: Final = 120


def answer_request(policy: AnswerPolicy, method: str, params: Any) -> Answer:
    """The answer ``policy`` gives to the request ``method`` with ``params`` (any JSON: a server may send
    anything; what cannot be read is declined or refused, never raised)."""
    params = params if isinstance(params, dict) else {}
    if method == "elicitation/create":
        return _elicit(policy, params)
    if method == "roots/list":
        if not policy.roots:
            # Not declared either (see client_capabilities): a server should not have asked.
            return Answer(
                method, f"roots/list: refused ({NO_ROOTS})", error_code=METHOD_NOT_FOUND, error_message=NO_ROOTS
            )
        roots = [root.to_json() for root in policy.roots]
        shown = ", ".join(root.uri for root in policy.roots)
        return Answer(method, f"roots/list: answered {len(roots)} root(s): {shown}", result={"roots": roots})
    if method == "sampling/createMessage":
        return Answer(
            method,
            f"sampling/createMessage: refused ({SAMPLING_REFUSED})",
            error_code=METHOD_NOT_FOUND,
            error_message=SAMPLING_REFUSED,
        )
    text = f"mcp-run does not support {method}"
    return Answer(method, f"{_quote(method)}: refused ({text})", error_code=METHOD_NOT_FOUND, error_message=text)


def _elicit(policy: AnswerPolicy, params: dict[str, Any]) -> Answer:
    method = "elicitation/create"
    message = params.get("message")
    asked = f"elicitation/create {_quote(message)}" if isinstance(message, str) else method
    decline = {"action": "decline"}
    mode = params.get("mode", "form")
    if mode == "url":
        url = params.get("url")
        where = _quote(url) if isinstance(url, str) else "(no URL)"
        return Answer(
            method, f"{asked}: declined (it asks a person to open {where}; mcp-run never opens URLs)", decline
        )
    if mode != "form":
        return Answer(method, f"{asked}: declined (unknown mode {_quote(mode)})", decline)
    if policy.elicitation is ElicitationPolicy.DECLINE:
        return Answer(
            method, f"{asked}: declined (no person to answer; --elicitation defaults accepts the defaults)", decline
        )
    content, missing = elicitation_defaults(params.get("requestedSchema"))
    if content is None:
        return Answer(method, f"{asked}: declined ({missing})", decline)
    return Answer(
        method,
        f"{asked}: accepted with the schema's defaults {_quote(content)}",
        {"action": "accept", "content": content},
    )


def elicitation_defaults(schema: Any) -> tuple[dict[str, Any] | None, str]:
    """The content that accepts ``schema`` (an elicitation's ``requestedSchema``) with its defaults, or
    ``None`` and why not: a required field without a valid default, or a schema that is not an object."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return None, "the requested schema is not an object schema"
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, dict) or not _names(required):
        return None, "the requested schema's properties or required list cannot be read"
    content = _fitting_defaults(properties)
    for name in required:
        if name not in content:
            return None, f"the required field {_quote(name)} {_why_missing(name in properties, properties.get(name))}"
    return content, ""


def _fitting_defaults(properties: dict[str, Any]) -> dict[str, Any]:
    """Each field's default, where it has one that fits its type."""
    return {
        name: prop["default"]
        for name, prop in properties.items()
        if isinstance(prop, dict) and "default" in prop and _fits(prop, prop["default"])
    }


def _names(value: Any) -> bool:
    """Whether ``value`` is a list of strings (a schema's ``required``)."""
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _why_missing(known: bool, prop: Any) -> str:
    """Why a required field (``known``: the schema lists it, as ``prop``) has no usable default."""
    if not known:
        return "is not a known field"
    if isinstance(prop, dict) and "default" in prop:
        return "has a default that does not fit its type"
    return "has no default"


def _fits(prop: dict[str, Any], value: Any) -> bool:
    """Whether ``value`` is a valid value of the primitive schema ``prop`` (the elicitation subset)."""
    kind = prop.get("type")
    check = _FITS.get(kind) if isinstance(kind, str) else None
    return check is not None and check(prop, value)


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fits_string(prop: dict[str, Any], value: Any) -> bool:
    if not isinstance(value, str):
        return False
    allowed = _allowed(prop)
    return allowed is None or value in allowed


def _fits_integer(prop: dict[str, Any], value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and _in_range(prop, value)


def _fits_number(prop: dict[str, Any], value: Any) -> bool:
    return _is_number(value) and math.isfinite(value) and _in_range(prop, value)


def _fits_array(prop: dict[str, Any], value: Any) -> bool:
    """A multi-select: a list of strings, each one the items' enum allows."""
    items = prop.get("items")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return False
    allowed = _allowed(items) if isinstance(items, dict) else None
    return allowed is None or all(v in allowed for v in value)


_FITS: Final[dict[str, Callable[[dict[str, Any], Any], bool]]] = {
    "string": _fits_string,
    "boolean": lambda _prop, value: isinstance(value, bool),
    "integer": _fits_integer,
    "number": _fits_number,
    "array": _fits_array,
}


def _allowed(schema: dict[str, Any]) -> set[str] | None:
    """The values a single- or multi-select enum allows (``enum``, or the ``const`` of ``oneOf``/``anyOf``
    entries); ``None`` when it is no enum."""
    enum_values = schema.get("enum")
    if isinstance(enum_values, list):
        return {v for v in enum_values if isinstance(v, str)}
    for key in ("oneOf", "anyOf"):
        options = schema.get(key)
        if isinstance(options, list):
            return {o["const"] for o in options if isinstance(o, dict) and isinstance(o.get("const"), str)}
    return None


def _in_range(prop: dict[str, Any], value: float) -> bool:
    low, high = prop.get("minimum"), prop.get("maximum")
    if _is_number(low) and value < low:
        return False
    return not (_is_number(high) and value > high)


def _quote(value: Any) -> str:
    """A short quoted rendering for the log line."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return cut(text, _MAX_QUOTE)  # masked, then cut: a secret never shows in part
