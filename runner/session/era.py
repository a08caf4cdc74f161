"""The two protocol eras a session can speak, behind one small seam (pure, no I/O).

- **Legacy** (2024-11-05 to 2025-11-25): an ``initialize`` handshake opens a session; requests go out as
  the caller built them; ``ping``, ``logging/setLevel`` and ``notifications/initialized`` exist; a call is
  cancelled with ``notifications/cancelled``.
- **Modern** (2026-07-28): no handshake, no session. Every request carries ``_meta`` with the protocol
  version, the client's capabilities and identity (and the log level it wants); over HTTP its headers
  mirror the body (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``, see
  :mod:`runner.protocol.headers`). ``ping`` and ``logging/setLevel`` are gone. Over HTTP, closing the
  response stream is the cancellation; over stdio, ``notifications/cancelled`` still is.

The session asks its :class:`Era` to stamp each request (:meth:`Era.stamp`), whether a method exists
(:meth:`Era.has`), how to cancel, and to screen a tool list (:meth:`Era.screen_tools`: over HTTP a modern
session drops tools whose ``x-mcp-header`` markings are invalid). How the era is chosen is
:mod:`.negotiate`'s; what the revision's error codes mean is :func:`modern_error`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from runner.errors import JsonRpcError
from runner.protocol.headers import NAME_BEARING, HeaderMark, InvalidHeaderMarking, encode_header_value, header_marks
from runner.protocol.headers import param_headers as _param_headers
from runner.protocol.mcp import Tool
from runner.protocol.versions import LEGACY_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS, PROTOCOL_CHOICES

__all__ = [
    "HEADER_MISMATCH",
    "LATEST_MODERN_VERSION",
    "LEGACY_VERSIONS",
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_PROTOCOL_VERSION",
    "MISSING_CAPABILITY",
    "MODERN_ERRORS",
    "MODERN_VERSIONS",
    "PROTOCOL_CHOICES",
    "UNSUPPORTED_VERSION",
    "Era",
    "EraMemory",
    "LegacyEra",
    "ModernEra",
    "is_modern",
    "modern_error",
]

LEGACY_VERSIONS: Final = LEGACY_PROTOCOL_VERSIONS
MODERN_VERSIONS: Final = MODERN_PROTOCOL_VERSIONS
LATEST_MODERN_VERSION: Final = MODERN_VERSIONS[-1]

META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"

HEADER_MISMATCH: Final = -32020
MISSING_CAPABILITY: Final = -32021
UNSUPPORTED_VERSION: Final = -32022
MODERN_ERRORS: Final = frozenset({HEADER_MISMATCH, MISSING_CAPABILITY, UNSUPPORTED_VERSION})
"""The error codes only a modern server sends: an answer carrying one comes from a modern server."""

_LEGACY_ONLY: Final = frozenset({"initialize", "ping", "logging/setLevel", "notifications/initialized"})


class EraMemory:
    """The era found for one server, kept for the run (``SessionOptions.era_memory``): ``version`` is
    ``None`` until a session found it, then ``"legacy"`` or the modern revision spoken; ``why`` says why
    ``auto`` chose it (see :func:`runner.session.negotiate.choose_era`)."""

    __slots__ = ("version", "why")

    def __init__(self) -> None:
        self.version: str | None = None
        self.why: str | None = None


def is_modern(version: str) -> bool:
    return version in MODERN_VERSIONS


class Era:
    """How requests look in one protocol era (see the module docstring). The base is the legacy era."""

    modern: bool = False

    def __init__(self, version: str) -> None:
        self.version = version

    def has(self, method: str) -> bool:
        """Whether ``method`` exists in this era."""
        return True

    @property
    def ping_method(self) -> str:
        """A request without side effects that any server of this era answers."""
        return "ping"

    @property
    def cancels_by_notification(self) -> bool:
        """Whether giving up on a request sends ``notifications/cancelled`` (else: closing its stream)."""
        return True

    def stamp(self, method: str, params: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, str] | None]:
        """The params to send for ``method`` and the HTTP headers that go with them (``None``: none)."""
        return params, None

    def screen_tools(self, tools: list[Tool], warn: Callable[[str], None]) -> list[Tool]:
        """The tools a caller may use out of a ``tools/list`` answer."""
        return tools

    def needs_tool_list(self, tool: str) -> bool:
        """Whether a call to ``tool`` needs its listing first (to know its ``x-mcp-header`` markings)."""
        return False


class LegacyEra(Era):
    """2024-11-05 to 2025-11-25: the requests go out as they are (the handshake negotiated the version)."""


class ModernEra(Era):
    """2026-07-28. ``http``: the session speaks Streamable HTTP (headers are sent, ``x-mcp-header`` markings
    are checked, cancelling closes the stream). ``log_level``: the level asked of the server per request."""

    modern = True

    def __init__(
        self,
        version: str,
        *,
        client_info: Mapping[str, Any],
        capabilities: Mapping[str, Any],
        log_level: str | None,
        http: bool,
    ) -> None:
        super().__init__(version)
        self.http = http
        meta: dict[str, Any] = {
            META_PROTOCOL_VERSION: version,
            META_CLIENT_INFO: dict(client_info),
            META_CLIENT_CAPABILITIES: dict(capabilities),
        }
        if log_level is not None:
            meta[META_LOG_LEVEL] = log_level
        self._meta = meta
        self._marks: dict[str, tuple[HeaderMark, ...]] = {}

    def has(self, method: str) -> bool:
        return method not in _LEGACY_ONLY

    @property
    def ping_method(self) -> str:
        return "server/discover"

    @property
    def cancels_by_notification(self) -> bool:
        return not self.http

    def stamp(self, method: str, params: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, str] | None]:
        given = params or {}
        stamped = {**given, "_meta": self._stamped_meta(given.get("_meta"))}
        if not self.http:
            return stamped, None
        return stamped, self._headers(method, given)

    def _stamped_meta(self, own: Any) -> dict[str, Any]:
        """The era's ``_meta`` under the request's own; capabilities a request adds (the tasks extension) are
        merged, not replaced."""
        if not isinstance(own, dict):
            return dict(self._meta)
        meta = {**self._meta, **own}
        extra = own.get(META_CLIENT_CAPABILITIES)
        if isinstance(extra, dict):
            meta[META_CLIENT_CAPABILITIES] = _merged_capabilities(self._meta[META_CLIENT_CAPABILITIES], extra)
        return meta

    def _headers(self, method: str, given: dict[str, Any]) -> dict[str, str]:
        """The HTTP headers of a request: version, method, the name it bears, a tool's marked parameters."""
        headers = {"MCP-Protocol-Version": self.version, "Mcp-Method": method}
        key = NAME_BEARING.get(method)
        name = given.get(key) if key is not None else None
        if isinstance(name, str):
            headers["Mcp-Name"] = encode_header_value(name)
        if method == "tools/call" and isinstance(name, str):
            arguments = given.get("arguments")
            marks = self._marks.get(name)
            if marks and isinstance(arguments, dict):
                headers.update(_param_headers(marks, arguments))
        return headers

    def needs_tool_list(self, tool: str) -> bool:
        return self.http and tool not in self._marks

    def screen_tools(self, tools: list[Tool], warn: Callable[[str], None]) -> list[Tool]:
        """Over HTTP, drop each tool whose ``x-mcp-header`` markings are invalid (with a warning naming the
        tool and why) and remember the valid ones' markings for :meth:`stamp`."""
        if not self.http:
            return tools
        kept: list[Tool] = []
        for tool in tools:
            try:
                marks = header_marks(tool.input_schema)
            except InvalidHeaderMarking as exc:
                warn(f"tool {tool.name!r} left out: its input schema is invalid for 2026-07-28 over HTTP: {exc}")
                self._marks.pop(tool.name, None)
                continue
            self._marks[tool.name] = marks
            kept.append(tool)
        return kept


def modern_error(code: int, message: str, data: Any, *, method: str | None) -> JsonRpcError:
    """A ``JsonRpcError`` whose text says what a 2026-07-28 error code means and what to do about it."""
    hint = ""
    if code == HEADER_MISMATCH:
        hint = (
            " (HeaderMismatch: the server found the request's HTTP headers missing or not matching its body; "
            "a proxy that rewrites headers, or a tool list that changed, are the usual causes)"
        )
    elif code == MISSING_CAPABILITY:
        wanted = data.get("requiredCapabilities") if isinstance(data, dict) else None
        what = f" it wants {wanted!r:.200}" if wanted is not None else ""
        hint = (
            f" (MissingRequiredClientCapability:{what}; mcp-run does not offer it: the server cannot serve this "
            "request to a batch client)"
        )
    elif code == UNSUPPORTED_VERSION:
        supported = data.get("supported") if isinstance(data, dict) else None
        hint = (
            f" (UnsupportedProtocolVersion: the server speaks {_versions(supported)}; pin one of them with "
            "--protocol-version or the server's 'protocol:', or use 'auto')"
        )
    return JsonRpcError(code, message + hint, data, method=method)


def _versions(supported: Any) -> str:
    if isinstance(supported, list) and supported and all(isinstance(v, str) for v in supported):
        return ", ".join(supported)
    return "no version it named"


def _merged_capabilities(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` added; their ``extensions`` objects merged."""
    merged = {**base, **extra}
    ours, theirs = base.get("extensions"), extra.get("extensions")
    if isinstance(ours, dict) and isinstance(theirs, dict):
        merged["extensions"] = {**ours, **theirs}
    return merged
