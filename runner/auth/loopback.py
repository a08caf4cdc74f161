"""The browser half of ``mcp-run login``: a one-shot HTTP listener on a loopback port for the redirect.

``open_loopback()`` binds ``127.0.0.1`` on a free port; its ``redirect_uri`` is
``http://127.0.0.1:PORT/callback``. ``authorize(url)`` prints the URL (always: the browser may not open, or
be on another machine), tries to open a browser, and waits (bounded) for the one request to ``/callback``;
it answers with a short page and returns the query's parameters. Other requests get 404.
"""

from __future__ import annotations

import sys
import webbrowser
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Final, TextIO
from urllib.parse import parse_qsl, urlsplit

import trio

from runner.auth.errors import AuthFailed

__all__ = ["LOGIN_TIMEOUT", "LoopbackRedirector", "open_loopback"]

LOGIN_TIMEOUT: Final = 300.0
_REQUEST_LIMIT: Final = 16384
_PAGE: Final = (
    b"<!doctype html><title>mcp-run</title><p>mcp-run received the authorization. You can close this window.</p>"
)


class LoopbackRedirector:
    def __init__(
        self,
        listener: trio.SocketListener,
        port: int,
        *,
        open_browser: bool,
        out: TextIO,
        timeout: float,
        browser: Callable[[str], bool] = webbrowser.open,
    ) -> None:
        self._listener = listener
        self._port = port
        self._open_browser = open_browser
        self._out = out
        self._timeout = timeout
        self._browser = browser

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self._port}/callback"

    async def authorize(self, url: str) -> Mapping[str, str]:
        print(f"Open this URL to log in (waiting up to {self._timeout:g} s):\n  {url}", file=self._out, flush=True)
        if self._open_browser:
            try:
                opened = await trio.to_thread.run_sync(self._browser, url)
            except Exception:  # no browser at all: the URL is printed above
                opened = False
            if not opened:
                print("No browser could be opened: open the URL by hand.", file=self._out, flush=True)
        with trio.move_on_after(self._timeout):
            while True:
                stream = await self._listener.accept()
                async with stream:
                    answer = await self._serve(stream)
                if answer is not None:
                    return answer
        raise AuthFailed(f"no authorization arrived within {self._timeout:g} s")

    async def _serve(self, stream: trio.SocketStream) -> Mapping[str, str] | None:
        data = b""
        with trio.move_on_after(10):
            while b"\r\n\r\n" not in data and len(data) < _REQUEST_LIMIT:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                data += chunk
        request_line = data.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split(" ")
        target = urlsplit(parts[1]) if len(parts) == 3 and parts[0] == "GET" else None
        if target is None or target.path != "/callback":
            await _respond(stream, b"404 Not Found", b"not found")
            return None
        await _respond(stream, b"200 OK", _PAGE)
        return dict(parse_qsl(target.query))


async def _respond(stream: trio.SocketStream, status: bytes, body: bytes) -> None:
    head = b"HTTP/1.1 " + status + b"\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n"
    head += b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    with suppress(trio.BrokenResourceError):
        await stream.send_all(head + body)


@asynccontextmanager
async def open_loopback(
    *, open_browser: bool = True, out: TextIO | None = None, timeout: float = LOGIN_TIMEOUT
) -> AsyncIterator[LoopbackRedirector]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    listener = listeners[0]
    port = listener.socket.getsockname()[1]
    try:
        yield LoopbackRedirector(listener, port, open_browser=open_browser, out=out or sys.stderr, timeout=timeout)
    finally:
        for each in listeners:
            await each.aclose()
