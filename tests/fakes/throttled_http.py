"""A Streamable HTTP MCP server that admits ``--rate`` tool calls per second (a token bucket of ``--burst``) and
answers the rest ``429`` with ``Retry-After`` before running anything: a rate-limiting gateway.

    python -m tests.fakes.throttled_http [--port 0] [--rate 20] [--burst 5] [--retry-after 1]

Prints ``throttled-http listening on http://127.0.0.1:PORT/mcp`` on stderr once it accepts connections. Tools:
those of :mod:`tests.benchmarks.echo_server` and ``write(key)``, a side effect (no annotations: not safe to
repeat) counted per key. ``GET /stats`` answers ``{"executed": {key: times}, "throttled": n, "calls": n}``.
Standard library asyncio, JSON responses, HTTP/1.1 keep-alive (the framing of
:mod:`tests.benchmarks.http_echo_server`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections import Counter
from typing import Any

from tests.benchmarks.echo_server import TOOLS, answer

_dumps = json.JSONEncoder(separators=(",", ":")).encode
SESSION_ID = "throttled-session"
WRITE = {
    "name": "write",
    "description": "Record one write of key (a side effect: not safe to repeat).",
    "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
}


class Bucket:
    """``rate`` tokens a second, at most ``burst`` saved."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.at = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class World:
    def __init__(self, bucket: Bucket, retry_after: str) -> None:
        self.bucket = bucket
        self.retry_after = retry_after
        self.executed: Counter[str] = Counter()
        self.throttled = 0
        self.calls = 0


def _response(status: str, body: bytes = b"", content_type: str | None = None, extra: tuple[str, ...] = ()) -> bytes:
    head = [f"HTTP/1.1 {status}", f"content-length: {len(body)}", f"mcp-session-id: {SESSION_ID}", *extra]
    if content_type:
        head.append(f"content-type: {content_type}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _post(world: World, message: dict[str, Any]) -> bytes:
    method = message.get("method")
    if method == "tools/call":
        world.calls += 1
        if not world.bucket.take():
            world.throttled += 1
            body = _dumps({"error": "rate limited"}).encode()
            return _response("429 Too Many Requests", body, "application/json", (f"retry-after: {world.retry_after}",))
        params = message["params"]
        if params["name"] == "write":
            key = str((params.get("arguments") or {}).get("key"))
            world.executed[key] += 1
            result = {"content": [{"type": "text", "text": f"wrote {key}"}], "isError": False}
            return _response("200 OK", _dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode(),
                             "application/json")  # fmt: skip
    reply = answer(message)
    if reply is None:
        return _response("202 Accepted")
    if method == "tools/list":
        reply["result"] = {"tools": [*TOOLS, WRITE]}
    return _response("200 OK", _dumps(reply).encode(), "application/json")


class Protocol(asyncio.Protocol):
    def __init__(self, world: World) -> None:
        self.world = world
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
            method, target = head[0].split(" ", 2)[:2]
            if method == "POST":
                out.append(_post(self.world, json.loads(body)))
            elif method == "GET" and target == "/stats":
                w = self.world
                stats = {"executed": dict(w.executed), "throttled": w.throttled, "calls": w.calls}
                out.append(_response("200 OK", _dumps(stats).encode(), "application/json"))
            elif method == "DELETE":
                out.append(_response("200 OK"))
            else:
                out.append(_response("405 Method Not Allowed"))
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


async def serve(port: int, world: World) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Protocol(world), "127.0.0.1", port)
    bound = server.sockets[0].getsockname()[1]
    print(f"throttled-http listening on http://127.0.0.1:{bound}/mcp", file=sys.stderr, flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--burst", type=int, default=5)
    parser.add_argument("--retry-after", default="1")
    args = parser.parse_args()
    world = World(Bucket(args.rate, args.burst), args.retry_after)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port, world))


if __name__ == "__main__":
    main()
