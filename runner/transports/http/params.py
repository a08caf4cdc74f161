"""How to reach one Streamable HTTP server: ``HttpParams``, checked once when built.

The URL and the configured headers are validated here (credentials never in the URL, no header the
transport sets itself), and nothing that may hold a secret is ever shown: ``repr`` masks header values,
:func:`safe_url` drops the URL's userinfo and query.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Final

import httpx2

from runner.errors import ConnectFailed
from runner.protocol.sse import DEFAULT_MAX_EVENT_BYTES
from runner.transports.http.authhook import AuthHook

__all__ = ["EXTRA_CONNECTIONS", "HttpParams", "safe_url"]

EXTRA_CONNECTIONS: Final = 2
"""Connections the pool holds beyond ``max_connections``: the GET stream, and notifications."""

_RESERVED_HEADERS: Final = frozenset(
    {"accept", "content-type", "content-length", "host", "mcp-session-id", "mcp-protocol-version", "last-event-id"}
)


@dataclass(frozen=True, slots=True, repr=False)
class HttpParams:
    """How to reach one Streamable HTTP server. Times are in seconds.

    ``url``                  the MCP endpoint, ``http://`` or ``https://``, without credentials
    ``headers``              sent on every request (e.g. ``Authorization``); masked in ``repr``
    ``max_connections``      calls in flight at once (the server's ``max_concurrency``); the pool gets two
                             more, for the GET stream and for notifications (:attr:`pool_size`)
    ``connect_timeout``      to open a connection; ``write_timeout`` to send a body; reads never time out
                             (a tool may run for an hour: the session's call timeout is the bound)
    ``send_attempts``        POSTs of one message the server rate limited (429), in attempts and in
    ``send_max_time``          total time; a POST that could not connect is not retried here (the
                               session's owner waits for the server and decides)
    ``backoff_initial``      the first retry waits this long, doubling up to ``backoff_max``, plus up
    ``backoff_max``, ``jitter``  to ``jitter`` at random
    ``resume_attempts``      GETs with ``Last-Event-ID`` for one outage of one request's stream, and
    ``resume_timeout``         the time they may take; a reconnect that brings new events starts afresh
    ``default_retry_ms``     the first reconnect's wait when the server sent no ``retry:``
    ``open_get_stream``      open the standalone GET stream after the handshake
    ``get_stream_attempts``  consecutive fruitless reconnects of that GET stream before giving it up
    ``max_event_bytes``      cap on one SSE event or JSON body
    ``close_timeout``        bound on the DELETE at close, and on closing a response
    ``auth``                 the authorization provider (:mod:`.authhook`): gives the ``Authorization``
                             header and answers 401/403; then ``headers`` may not hold ``Authorization``
    """

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    max_connections: int = 10
    connect_timeout: float = 10.0
    write_timeout: float = 30.0
    send_attempts: int = 5
    send_max_time: float = 60.0
    backoff_initial: float = 0.5
    backoff_max: float = 10.0
    jitter: float = 0.5
    resume_attempts: int = 5
    resume_timeout: float = 60.0
    default_retry_ms: int = 1000
    open_get_stream: bool = True
    get_stream_attempts: int = 5
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    close_timeout: float = 5.0
    auth: AuthHook | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        _check_url(self.url)
        headers = dict(self.headers)
        for name, value in headers.items():
            _check_header(name, value, oauth=self.auth is not None)
        object.__setattr__(self, "headers", MappingProxyType(headers))
        self._check_numbers()

    def _check_numbers(self) -> None:
        positive = ("max_connections", "send_attempts", "resume_attempts", "get_stream_attempts", "max_event_bytes")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("connect_timeout", "write_timeout", "send_max_time", "resume_timeout", "close_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        if self.backoff_initial < 0 or self.backoff_max < 0 or self.jitter < 0 or self.default_retry_ms < 0:
            raise ValueError("backoff_initial, backoff_max, jitter and default_retry_ms cannot be negative")

    def __repr__(self) -> str:
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "headers":
                value = {name: "***" for name in value}
            elif f.name == "auth" and value is not None:
                value = "***"
            parts.append(f"{f.name}={value!r}")
        return f"HttpParams({', '.join(parts)})"

    @property
    def pool_size(self) -> int:
        """Connections the HTTP client may open: ``max_connections`` plus ``EXTRA_CONNECTIONS``."""
        return self.max_connections + EXTRA_CONNECTIONS

    @property
    def timeout(self) -> httpx2.Timeout:
        """The timeouts of every request: connect and write bounded, reads and the pool never."""
        return httpx2.Timeout(connect=self.connect_timeout, read=None, write=self.write_timeout, pool=None)

    @property
    def name(self) -> str:
        """The endpoint as errors and logs show it (:func:`safe_url`)."""
        return safe_url(httpx2.URL(self.url))


def safe_url(url: httpx2.URL) -> str:
    """The URL without userinfo and query (either may hold a secret)."""
    return str(url.copy_with(username=None, password=None, query=None, fragment=None))


def _check_url(text: str) -> None:
    """An http(s) URL with a host and no credentials (they belong in a header, which is masked)."""
    try:
        url = httpx2.URL(text)
    except httpx2.InvalidURL as exc:
        raise ConnectFailed(f"invalid server URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ConnectFailed(f"the server URL must be http:// or https:// with a host, got {safe_url(url)}")
    if url.userinfo:
        raise ConnectFailed(
            f"the server URL {safe_url(url)} carries credentials: put credentials in a header "
            "(for example Authorization: Bearer ...), never in the URL"
        )


def _check_header(name: object, value: object, *, oauth: bool) -> None:
    """A configured header: strings, not one the transport sets, no Authorization beside OAuth."""
    if not isinstance(name, str) or not isinstance(value, str):
        raise ConnectFailed(f"header names and values must be strings (header {name!r})")
    if name.lower() in _RESERVED_HEADERS:
        raise ConnectFailed(f"header {name!r} is set by the transport itself and cannot be configured")
    if oauth and name.lower() == "authorization":
        raise ConnectFailed("an Authorization header cannot be configured together with OAuth (auth:)")
