"""A test peer on the official MCP Python SDK (``MCPServer``), started by integration tests.

    python tests/peers/sdk_server.py [stdio|http] [--host 127.0.0.1] [--port 0] [--resumable]
        [--json-response] [--retry-interval MS] [--count-file PATH] [--stateless | --modern-only]

``--stateless`` serves the SDK's stateless mode (both eras, no sessions); ``--modern-only`` answers every
POST with the SDK's own 2026-07-28 handler, as go-sdk ``-stateless`` or csharp-sdk ``/stateless``
deployments do (``initialize`` gets -32601).

Over HTTP it serves ``/mcp`` on loopback only and prints one line to stderr once it accepts
connections: ``MCP-RUN-DEMO listening on http://127.0.0.1:PORT/mcp`` (the demo server's line;
``runner.demo.server.LISTENING_RE`` matches it).

Tools:
    echo(text) -> text                              read-only, idempotent
    add(a: int, b: int) -> a + b                    (structured ``{"result": n}``)
    slow(steps=5, delay=0.05) -> "done {steps}"     progress i/steps ("step i/n") + log per step
    fail(message) -> tool error (isError: true) with ``message``
    structured() -> {"name": "mcp-run", "items": [1, 2, 3], "nested": {"ok": true}}
    count(key, delay=0) -> key                      appends ``key`` + newline to --count-file, then waits
    counted(key) -> {"counted": bool} as JSON text   read-only: whether --count-file holds ``key`` (a reconcile tool)
    close_stream(steps=4, delay=0.05) -> "closed-and-finished"
        appends "close_stream" to --count-file, reports progress, closes its SSE stream half-way
        (SEP-1699; effective only over HTTP with --resumable on a 2025-11-25 session, i.e. after
        the initialize handshake: the SDK's stateless 2026-07-28 path has no close), then keeps
        reporting progress
    big(n) -> a text of exactly n bytes (ASCII)
    work(key, steps=4, delay=0.05) -> "worked KEY"  side-effecting: appends ``key`` to --count-file, then
        reports progress i/steps, ``delay`` seconds apart
    meta() -> the request's ``_meta`` as JSON text  read-only (what a client sent beside the arguments:
        its progress token, a ``traceparent``)

Calling an unknown tool name gives a tool result with isError: true ("Unknown tool: NAME"), not a
JSON-RPC error.
"""

from __future__ import annotations

import argparse
import json
import os
import string
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel

from runner.demo.server import add_http_arguments, run_http, tool_log

Ctx = Context[Any, Any]

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, destructive_hint=False)


class Structured(BaseModel):
    name: str
    items: list[int]
    nested: dict[str, bool]


def _append_line(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def build_server(count_file: Path | None) -> MCPServer:
    server: MCPServer = MCPServer("mcp-run-sdk-peer", version="1", log_level="WARNING")

    async def record(key: str) -> None:
        if count_file is not None:
            await anyio.to_thread.run_sync(_append_line, count_file, key)

    @server.tool(annotations=READ_ONLY)
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def slow(ctx: Ctx, steps: int = 5, delay: float = 0.05) -> str:
        """Report progress `steps` times, `delay` seconds apart, logging each step."""
        for i in range(1, steps + 1):
            await anyio.sleep(delay)
            await ctx.report_progress(i, steps, f"step {i}/{steps}")
            await tool_log(ctx, "info", f"slow step {i}")
        return f"done {steps}"

    @server.tool()
    def fail(message: str) -> str:
        """Always fails with `message` (a tool error, isError: true)."""
        raise ToolError(message)

    @server.tool()
    def structured() -> Structured:
        """Return a fixed structured result."""
        return Structured(name="mcp-run", items=[1, 2, 3], nested={"ok": True})

    @server.tool()
    async def count(key: str, delay: float = 0.0) -> str:
        """Append `key` to the count file (one line per execution), wait `delay` seconds, return it."""
        await record(key)
        if delay:
            await anyio.sleep(delay)
        return key

    @server.tool(annotations=READ_ONLY)
    def counted(key: str) -> str:
        """Whether `key` was counted (is a line of the count file), as JSON text: {"counted": true}."""
        lines = count_file.read_text(encoding="utf-8").split() if count_file is not None and count_file.exists() else []
        return json.dumps({"counted": key in lines})

    @server.tool()
    async def close_stream(ctx: Ctx, steps: int = 4, delay: float = 0.05) -> str:
        """Report progress, close this request's SSE stream half-way (SEP-1699), keep going."""
        await record("close_stream")
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}/{steps}")
            if i == steps // 2:
                await ctx.close_sse_stream()
            await anyio.sleep(delay)
        return "closed-and-finished"

    @server.tool(annotations=READ_ONLY)
    def meta(ctx: Ctx) -> str:
        """Return this request's `_meta`, as JSON text."""
        return json.dumps(dict(ctx.request_context.meta or {}), sort_keys=True, default=str)

    @server.tool()
    async def work(ctx: Ctx, key: str, steps: int = 4, delay: float = 0.05) -> str:
        """Record one execution of `key`, then report progress `steps` times, `delay` seconds apart."""
        await record(key)
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}/{steps}")
            await anyio.sleep(delay)
        return f"worked {key}"

    @server.tool()
    def big(n: int) -> str:
        """Return a text of exactly `n` bytes."""
        if n < 0:
            raise ToolError("n must be >= 0")
        alphabet = string.ascii_letters + string.digits
        return (alphabet * (n // len(alphabet) + 1))[:n]

    return server


def _stateless(server: MCPServer, *, modern_only: bool) -> None:
    """Make ``server.streamable_http_app`` stateless; ``modern_only``: route every request to the SDK's
    2026-07-28 handler (a test peer's patch of the session manager, nothing more)."""
    make_app = server.streamable_http_app

    def stateless_app(**kwargs: Any) -> Any:
        return make_app(**{**kwargs, "stateless_http": True, "event_store": None})

    server.streamable_http_app = stateless_app  # type: ignore[method-assign]
    if modern_only:
        from mcp.server._streamable_http_modern import handle_modern_request
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        async def modern(self: StreamableHTTPSessionManager, scope: Any, receive: Any, send: Any) -> None:
            await handle_modern_request(
                self.app, self.security_settings, self.json_response, self._lifespan_state, scope, receive, send
            )

        StreamableHTTPSessionManager._handle_request = modern  # type: ignore[method-assign]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sdk_server.py", description="Official-SDK test peer for mcp-run.")
    parser.add_argument("transport", nargs="?", choices=("stdio", "http"), default="stdio")
    add_http_arguments(parser)
    parser.add_argument("--count-file", type=Path, default=None, help="append one line per count/close_stream call")
    era = parser.add_mutually_exclusive_group()
    era.add_argument("--stateless", action="store_true", help="the SDK's stateless mode (both eras)")
    era.add_argument("--modern-only", action="store_true", help="every POST to the SDK's 2026-07-28 handler")
    args = parser.parse_args(argv)
    server = build_server(args.count_file)
    if args.stateless or args.modern_only:
        _stateless(server, modern_only=args.modern_only)
    if args.transport == "stdio":
        server.run("stdio")
        return 0
    try:
        run_http(server, args)
    except ValueError as exc:
        parser.error(str(exc))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
