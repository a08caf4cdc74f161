"""Where the real peers live and how to start them (see peers/package.json and tests/peers/)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDK_SERVER = ROOT / "tests" / "peers" / "sdk_server.py"
PEERS = ROOT / "peers" / "node_modules"
NODE22 = PEERS / ".bin" / "node"
EVERYTHING = PEERS / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
LOOPBACK_PRELOAD = ROOT / "tests" / "peers" / "loopback.cjs"


def everything_command(transport: str) -> list[str] | None:
    """argv for server-everything, or None when the npm peers are not installed. Over HTTP a preloaded
    script forces its listen() onto 127.0.0.1 (it binds all interfaces by default)."""
    if not EVERYTHING.is_file():
        return None
    node = str(NODE22) if NODE22.exists() else "node"
    argv = [node]
    if transport != "stdio":
        argv += ["-r", str(LOOPBACK_PRELOAD)]
    return [*argv, str(EVERYTHING), transport]


def require_peers() -> bool:
    """CI must not skip integration tests silently: MCP_RUN_REQUIRE_PEERS=1 turns a skip into a failure."""
    return os.environ.get("MCP_RUN_REQUIRE_PEERS") == "1"
