"""A test peer on the official MCP Python SDK whose tools ask the client things, over any transport.

    python tests/peers/sdk_asking_server.py [stdio|http|sse] [--port 0] [--count-file PATH]

``http`` serves Streamable HTTP at ``/mcp``; ``sse`` serves the 2024-11-05 HTTP+SSE transport with its
GET stream at ``/mcp`` (so a POST there gets 405, as from a deployed legacy server) and messages at
``/messages/``. Over HTTP it prints ``MCP-RUN-DEMO listening on http://127.0.0.1:PORT/mcp`` to stderr
once it accepts connections (``runner.demo.server.LISTENING_RE``).

Tools (besides those of ``tests/peers/sdk_server.py``: echo, add, count, ...):
    ask() -> "accept {...}" / "decline"     an elicitation whose every field has a default
    ask_name() -> "accept {...}" / "decline"  an elicitation with a required field without default
    roots() -> the root URIs, one a line, or "roots refused: ..."
    sample() -> "sampling refused: ..."     asks the client for an LLM completion
    resolved() -> "{action} {data} | {root uris}"
        the same questions through the SDK's resolvers: mid-call requests in the 2025 era, one
        ``input_required`` result (elicitation and roots together) in 2026-07-28
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import anyio
import uvicorn
from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve
from mcp_types import ListRootsResult, SamplingMessage, TextContent
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from runner.demo.server import LISTENING_LINE
from tests.peers.sdk_server import build_server

Ctx = Context[Any, Any]


class Defaults(BaseModel):
    name: str = "John Doe"
    count: int = 3
    ratio: float = 0.5
    ok: bool = True


class Named(BaseModel):
    name: str


def add_asking_tools(server: MCPServer) -> None:
    @server.tool()
    async def ask(ctx: Ctx) -> str:
        """Elicit a form whose fields all have defaults."""
        result = await ctx.elicit("Fill in the form (every field has a default)", schema=Defaults)
        data = result.data.model_dump() if result.action == "accept" and result.data is not None else None
        return result.action if data is None else f"{result.action} {data}"

    @server.tool()
    async def ask_name(ctx: Ctx) -> str:
        """Elicit a form with a required field that has no default."""
        result = await ctx.elicit("What is your name?", schema=Named)
        return result.action

    @server.tool()
    async def roots(ctx: Ctx) -> str:
        """List the client's roots."""
        try:
            listed = await ctx.session.list_roots()
        except Exception as exc:  # the client's refusal, shown to the test
            return f"roots refused: {exc}"
        return "\n".join(str(root.uri) for root in listed.roots)

    @server.tool()
    async def sample(ctx: Ctx) -> str:
        """Ask the client for an LLM completion."""
        try:
            await ctx.session.create_message(
                [SamplingMessage(role="user", content=TextContent(type="text", text="hi"))], max_tokens=5
            )
        except Exception as exc:
            return f"sampling refused: {exc}"
        return "sampled"


async def _form() -> Elicit[Defaults]:
    return Elicit("Fill in the form (resolved)", Defaults)


async def _roots() -> ListRoots:
    return ListRoots()


def add_resolved_tool(server: MCPServer) -> None:
    @server.tool()
    async def resolved(
        form: Annotated[ElicitationResult[Defaults], Resolve(_form)],
        roots: Annotated[ListRootsResult, Resolve(_roots)],
    ) -> str:
        """Elicit a form and list the roots through resolvers (input_required in 2026-07-28)."""
        data = getattr(form, "data", None)
        shown = data.model_dump() if data is not None else None
        return f"{form.action} {shown} | {' '.join(str(r.uri) for r in roots.roots)}"


class _Announcing(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, line: str) -> None:
        super().__init__(config)
        self._line = line

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.should_exit:
            print(self._line, file=sys.stderr, flush=True)


async def serve(server: MCPServer, transport: str, port: int) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    bound = sock.getsockname()[1]
    if transport == "sse":
        app = server.sse_app(sse_path="/mcp", message_path="/messages/", host="127.0.0.1")
    else:
        app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=3)
    with sock:
        await _Announcing(config, LISTENING_LINE.format(url=f"http://127.0.0.1:{bound}/mcp")).serve(sockets=[sock])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sdk_asking_server.py")
    parser.add_argument("transport", nargs="?", choices=("stdio", "http", "sse"), default="stdio")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--count-file", type=Path, default=None)
    args = parser.parse_args(argv)
    server = build_server(args.count_file)
    add_asking_tools(server)
    add_resolved_tool(server)
    if args.transport == "stdio":
        server.run("stdio")
        return 0
    try:
        anyio.run(serve, server, args.transport, args.port)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
