"""What the Streamable HTTP transport needs from an HTTP client, and which client it gets.

The transport sends every request to one URL and reads each response's head, then its body as a stream.
``HttpClient`` is that, nothing more; two clients provide it:

- :class:`.lean.LeanClient` (h11 on trio streams): the default, about a third of the full client's CPU per
  request;
- :class:`HttpxClient`, over ``httpx2.AsyncClient``: used when the environment names a proxy
  (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, any case), when a client is injected (tests on
  ``httpx2.MockTransport``), or when ``MCP_RUN_HTTP_CLIENT=httpx2`` asks for it.

Both raise httpx2's exceptions, which :mod:`.classify` reads the same way.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from typing import Final, Protocol

import httpx2

from runner.transports.http.lean import LeanClient, LeanResponse
from runner.transports.http.params import HttpParams

__all__ = [
    "CLIENT_VARIABLE",
    "HttpClient",
    "HttpResponse",
    "HttpxClient",
    "make_client",
    "take_body",
    "wants_full_client",
]

CLIENT_VARIABLE: Final = "MCP_RUN_HTTP_CLIENT"
"""``httpx2`` forces the full client, ``lean`` the lean one (proxies are then ignored); unset: automatic."""

_PROXY_VARIABLES: Final = ("http_proxy", "https_proxy", "all_proxy")


class HttpResponse(Protocol):
    """A response whose head is in; the body is read once, by ``aiter_bytes``; ``aclose`` always."""

    @property
    def status_code(self) -> int: ...

    @property
    def reason_phrase(self) -> str: ...

    @property
    def headers(self) -> Mapping[str, str]:
        """Looked up by lower-case name."""
        ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


def take_body(response: HttpResponse) -> bytes | None:
    """The whole body of ``response`` when it is already in hand, read with the head (the lean client, a
    ``content-length`` body that came in the same reads), the response then closed, its connection back in the
    pool; ``None`` otherwise, nothing consumed: read it with ``aiter_bytes``."""
    return response.take_body() if type(response) is LeanResponse else None


class HttpClient(Protocol):
    async def open(self, method: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        """Send a request to the endpoint; return once the response head is in (its body unread)."""
        ...

    async def aclose(self) -> None: ...


class HttpxClient:
    """``HttpClient`` over an ``httpx2.AsyncClient`` (redirects are never followed)."""

    def __init__(self, client: httpx2.AsyncClient, params: HttpParams) -> None:
        self.client = client
        self._url = httpx2.URL(params.url)
        self._timeout = params.timeout

    async def open(self, method: str, headers: Mapping[str, str], body: bytes | None = None) -> HttpResponse:
        request = self.client.build_request(method, self._url, content=body, headers=headers, timeout=self._timeout)
        return await self.client.send(request, stream=True, follow_redirects=False)

    async def aclose(self) -> None:
        await self.client.aclose()


def wants_full_client(environ: Mapping[str, str]) -> bool:
    """Whether the full client is needed: a proxy is configured, or ``MCP_RUN_HTTP_CLIENT=httpx2``."""
    choice = environ.get(CLIENT_VARIABLE, "").strip().lower()
    if choice in ("httpx2", "lean"):
        return choice == "httpx2"
    return any(name.lower() in _PROXY_VARIABLES and value.strip() for name, value in environ.items())


def make_client(params: HttpParams, environ: Mapping[str, str] | None = None) -> HttpClient:
    """The client for ``params``: the lean one unless :func:`wants_full_client`."""
    if wants_full_client(os.environ if environ is None else environ):
        full = httpx2.AsyncClient(
            timeout=params.timeout,
            limits=httpx2.Limits(
                max_connections=params.pool_size, max_keepalive_connections=params.pool_size, keepalive_expiry=4.0
            ),
            follow_redirects=False,
        )
        return HttpxClient(full, params)
    return LeanClient(
        params.url,
        max_connections=params.pool_size,
        connect_timeout=params.connect_timeout,
        write_timeout=params.write_timeout,
        keepalive_expiry=4.0,
    )
