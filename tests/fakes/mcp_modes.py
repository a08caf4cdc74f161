"""A tiny stdlib MCP server over stdio whose behaviour is chosen by argv[1], for end-to-end CLI tests.

Modes: ``ok`` (echo tool), ``protocol-error`` (tools/call answers a JSON-RPC error), ``tool-error``,
``die-on-call`` (exits after reading a tools/call), ``die-on-init`` (exits with stderr during initialize),
``die-on-list`` (exits with stderr on tools/list),
``garbage`` (prints non-JSON lines and an answer to an unknown id before each real answer), ``silent``
(never answers tools/call), ``bad-version`` (answers initialize with a version nobody speaks), ``huge``
(answers tools/call with a line over 2 MiB).
"""

import json
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"


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
            if MODE == "die-on-init":
                sys.stderr.write("fatal: cannot load configuration\n")
                sys.exit(3)
            version = "1999-01-01" if MODE == "bad-version" else msg["params"]["protocolVersion"]
            send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {
                        "protocolVersion": version,
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "modes"},
                    },
                }
            )
        elif method == "tools/list":
            if MODE == "die-on-list":
                sys.stderr.write("fatal: out of memory\n")
                sys.exit(1)
            send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {
                        "tools": [
                            {
                                "name": "echo",
                                "inputSchema": {
                                    "type": "object",
                                    "properties": {"text": {"type": "string"}},
                                    "required": ["text"],
                                },
                            }
                        ]
                    },
                }
            )
        elif method == "tools/call":
            if MODE == "die-on-call":
                sys.exit(1)
            if MODE == "silent":
                continue
            if MODE == "garbage":
                sys.stdout.write("DEBUG: starting work\n")
                send({"jsonrpc": "2.0", "id": 999999, "result": {"content": []}})
            if MODE == "protocol-error":
                send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "Unknown tool: nope"}})
            elif MODE == "huge":
                send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "x" * (3 << 20)}]}})
            else:
                text = msg["params"]["arguments"].get("text", "")
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": rid,
                        "result": {"content": [{"type": "text", "text": text}], "isError": MODE == "tool-error"},
                    }
                )
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})


main()
