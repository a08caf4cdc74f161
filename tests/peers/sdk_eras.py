"""The official-SDK test peer (tests/peers/sdk_server.py, same tools) served in the protocol eras that the
plain ``sdk_server.py http`` does not cover, for the real-server matrix (tests/integration/test_server_matrix.py).

    python tests/peers/sdk_eras.py stateless|modern-only|sse [--port 0]

``stateless``    Streamable HTTP, ``stateless_http=True``: no session id; serves the ``initialize`` handshake
                 (2025-11-25) and the stateless 2026-07-28 revision alike.
``modern-only``  Streamable HTTP where every request goes to the SDK's own 2026-07-28 handler
                 (``handle_modern_request``), as go-sdk ``-stateless`` or csharp-sdk ``/stateless``
                 deployments do: ``initialize`` gets -32601, a request without ``_meta`` gets 400 -32602.
``sse``          the deprecated HTTP+SSE transport (2024-11-05): GET ``/sse`` yields an ``endpoint`` event
                 naming ``/messages/?session_id=...``; POSTing to ``/sse`` gets 405.

It listens on 127.0.0.1 only and prints one line to stderr once it accepts connections:
``MCP-RUN-ERA listening on http://127.0.0.1:PORT/PATH`` (``/mcp``, or ``/sse`` for ``sse``).
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Sequence
from typing import Any

import anyio
import uvicorn
from sdk_server import build_server  # the script beside this one (its folder is first on sys.path)
from starlette.types import Receive, Scope, Send

MODES = ("stateless", "modern-only", "sse")
LISTENING_LINE = "MCP-RUN-ERA listening on {url}"


def _route_everything_to_the_modern_handler() -> None:
    """Make every StreamableHTTPSessionManager answer as a server that speaks only 2026-07-28."""
    from mcp.server._streamable_http_modern import handle_modern_request
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    async def modern_only(self: Any, scope: Scope, receive: Receive, send: Send) -> None:
        await handle_modern_request(
            self.app, self.security_settings, self.json_response, self._lifespan_state, scope, receive, send
        )

    StreamableHTTPSessionManager._handle_request = modern_only  # type: ignore[method-assign]


class _Announcing(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, line: str) -> None:
        super().__init__(config)
        self._line = line

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.should_exit:
            print(self._line, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sdk_eras.py", description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = build_server(None)
    if args.mode == "modern-only":
        _route_everything_to_the_modern_handler()
    if args.mode == "sse":
        app = server.sse_app(host="127.0.0.1")
        path = "/sse"
    else:
        app = server.streamable_http_app(stateless_http=True, host="127.0.0.1")
        path = "/mcp"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=3)
    line = LISTENING_LINE.format(url=f"http://127.0.0.1:{port}{path}")

    async def serve() -> None:
        with sock:
            await _Announcing(config, line).serve(sockets=[sock])

    try:
        anyio.run(serve)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
