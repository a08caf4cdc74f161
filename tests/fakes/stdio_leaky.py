"""A stdio MCP server that prints a secret (its ``LEAK`` variable) in a traceback on stderr and dies: with
``init`` while it starts (before it answers ``initialize``), with ``call`` on its first ``tools/call`` (after
reading it). It lists one tool, ``echo``."""

import json
import os
import sys

WHEN = sys.argv[1] if len(sys.argv) > 1 else "call"


def die() -> None:
    sys.stderr.write("Traceback (most recent call last):\n")
    sys.stderr.write(f"  config = {os.environ.get('LEAK', '')}\n")
    sys.stderr.write("RuntimeError: the key above is not valid\n")
    sys.stderr.flush()
    sys.exit(1)


def send(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    if WHEN == "init":
        die()
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:
            continue
        if method == "initialize":
            info = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}}}
            send({"jsonrpc": "2.0", "id": rid, "result": {**info, "serverInfo": {"name": "leaky"}}})
        elif method == "tools/list":
            tool = {"name": "echo", "inputSchema": {"type": "object"}}
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [tool]}})
        elif method == "tools/call":
            die()
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})


main()
