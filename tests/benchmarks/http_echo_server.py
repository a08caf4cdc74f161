"""A minimal Streamable HTTP MCP server for the benchmarks: standard library asyncio, JSON responses.

    python -m tests.benchmarks.http_echo_server [--port 0]

Prints ``bench-http listening on http://127.0.0.1:PORT/mcp`` on stderr once it accepts connections. Every POST
is answered with one JSON body (``application/json``; ``202`` for notifications), a GET with ``405`` (no
standalone stream), a DELETE with ``200``. HTTP/1.1 keep-alive, no chunked bodies: just enough HTTP for an
MCP client, so that the server costs little next to the client being measured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Callable

from tests.benchmarks.echo_server import answer

_dumps = json.JSONEncoder(separators=(",", ":")).encode
SESSION_ID = "bench-session"

Handler = Callable[[str, str, bytes], bytes]
"""What a server answers to one request: (method, target, body) -> the whole HTTP response."""


def response(
    status: str,
    body: bytes = b"",
    content_type: str | None = None,
    extra: tuple[str, ...] = (),
    session: str = SESSION_ID,
) -> bytes:
    head = [f"HTTP/1.1 {status}", f"content-length: {len(body)}", f"mcp-session-id: {session}", *extra]
    if content_type:
        head.append(f"content-type: {content_type}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def echo(method: str, target: str, body: bytes) -> bytes:
    """The benchmark server: every POST answered by :func:`tests.benchmarks.echo_server.answer`."""
    if method == "POST":
        reply = answer(json.loads(body))
        if reply is None:
            return response("202 Accepted")
        return response("200 OK", _dumps(reply).encode(), "application/json")
    if method == "DELETE":
        return response("200 OK")
    return response("405 Method Not Allowed")


class HttpProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive framing (``content-length`` bodies only), each request answered by ``handle``."""

    def __init__(self, handle: Handler) -> None:
        self.handle = handle
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        out = []
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                break
            head = self.buffer[:end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                break
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            method, target = [*head[0].split(" ", 2), ""][:2]
            out.append(self.handle(method, target, body))
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


async def serve(port: int, handle: Handler = echo, name: str = "bench-http") -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: HttpProtocol(handle), "127.0.0.1", port)
    bound = server.sockets[0].getsockname()[1]
    print(f"{name} listening on http://127.0.0.1:{bound}/mcp", file=sys.stderr, flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port))


if __name__ == "__main__":
    main()
