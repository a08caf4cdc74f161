"""A minimal MCP server over stdio for the benchmarks: JSON lines, standard library only.

    python -m tests.benchmarks.echo_server [--cpu-file PATH]

It answers ``initialize``, ``ping``, ``tools/list`` and ``tools/call`` of two tools, ``echo(text)`` (the text
back as one text block) and ``range(n)`` (structured content ``{"items": [0, ..., n-1]}``, for fan-outs),
and ignores notifications. It reads whatever is in the pipe, answers all of it and writes the answers in one
``os.write``, so that it is never the slowest end of a benchmark.

``--cpu-file PATH``: at exit (end of stdin, or SIGTERM) write this process's own CPU seconds
(``time.process_time()``) to ``PATH``, so that a benchmark can subtract the server's CPU from a client's
whole-process figure (``os.wait4`` of a client counts the children it reaped).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

TOOLS = [
    {
        "name": "echo",
        "description": "Return the text unchanged.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "annotations": {"readOnlyHint": True, "idempotentHint": True},
    },
    {
        "name": "range",
        "description": "The integers 0..n-1 as structured content.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    },
]

_dumps = json.JSONEncoder(separators=(",", ":")).encode


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    """The response to one message (None for a notification)."""
    rid = message.get("id")
    method = message.get("method")
    if rid is None or method is None:
        return None
    if method == "tools/call":
        params = message["params"]
        args = params.get("arguments") or {}
        if params["name"] == "echo":
            result: dict[str, Any] = {"content": [{"type": "text", "text": args.get("text", "")}], "isError": False}
        elif params["name"] == "range":
            items = list(range(int(args["n"])))
            result = {
                "content": [{"type": "text", "text": f"{len(items)} items"}],
                "structuredContent": {"items": items},
                "isError": False,
            }
        else:
            result = {"content": [{"type": "text", "text": f"Unknown tool: {params['name']}"}], "isError": True}
    elif method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bench-echo", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def serve() -> None:
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    rest = b""
    while chunk := os.read(stdin, 1 << 16):
        *lines, rest = (rest + chunk).split(b"\n")
        out = []
        for line in lines:
            if line.strip():
                reply = answer(json.loads(line))
                if reply is not None:
                    out.append(_dumps(reply))
        if out:
            data = ("\n".join(out) + "\n").encode()
            while data:
                data = data[os.write(stdout, data) :]


def main() -> None:
    args = sys.argv[1:]
    cpu_file = args[args.index("--cpu-file") + 1] if "--cpu-file" in args else None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        serve()
    finally:
        if cpu_file is not None:
            with open(cpu_file, "w") as f:
                f.write(f"{time.process_time()}\n")


if __name__ == "__main__":
    main()
