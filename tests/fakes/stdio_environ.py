"""A tiny stdlib MCP server over stdio with one tool, ``environ``, that reports where and with what it runs:
``{"cwd": its working directory, "argv0": how it was started, "env": its whole environment}`` as structured
content. The end-to-end tests of where servers start and which variables reach them read it."""

import json
import os
import sys


def send(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:
            continue
        if method == "initialize":
            result: dict[str, object] = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "environ"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "environ", "inputSchema": {"type": "object", "properties": {}}}]}
        elif method == "tools/call":
            report = {"cwd": os.getcwd(), "argv0": sys.argv[0], "env": dict(os.environ)}
            result = {"content": [{"type": "text", "text": json.dumps(report)}], "structuredContent": report}
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}})
            continue
        send({"jsonrpc": "2.0", "id": rid, "result": result})


main()
