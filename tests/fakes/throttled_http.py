"""A Streamable HTTP MCP server that admits ``--rate`` tool calls per second (a token bucket of ``--burst``) and
answers the rest ``429`` with ``Retry-After`` before running anything: a rate-limiting gateway.

    python -m tests.fakes.throttled_http [--port 0] [--rate 20] [--burst 5] [--retry-after 1]

Prints ``throttled-http listening on http://127.0.0.1:PORT/mcp`` on stderr once it accepts connections. Tools:
those of :mod:`tests.benchmarks.echo_server` and ``write(key)``, a side effect (no annotations: not safe to
repeat) counted per key. ``GET /stats`` answers ``{"executed": {key: times}, "throttled": n, "calls": n}``.
Standard library asyncio, JSON responses, HTTP/1.1 keep-alive (the framing and server of
:mod:`tests.benchmarks.http_echo_server`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections import Counter
from typing import Any

from tests.benchmarks.echo_server import TOOLS, answer
from tests.benchmarks.http_echo_server import Handler, response, serve

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
    return response(status, body, content_type, extra, session=SESSION_ID)


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


def handler(world: World) -> Handler:
    def handle(method: str, target: str, body: bytes) -> bytes:
        if method == "POST":
            return _post(world, json.loads(body))
        if method == "GET" and target == "/stats":
            stats = {"executed": dict(world.executed), "throttled": world.throttled, "calls": world.calls}
            return _response("200 OK", _dumps(stats).encode(), "application/json")
        if method == "DELETE":
            return _response("200 OK")
        return _response("405 Method Not Allowed")

    return handle


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--burst", type=int, default=5)
    parser.add_argument("--retry-after", default="1")
    args = parser.parse_args()
    world = World(Bucket(args.rate, args.burst), args.retry_after)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port, handler(world), "throttled-http"))


if __name__ == "__main__":
    main()
