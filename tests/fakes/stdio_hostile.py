"""A stdio MCP server (standard library only) whose text is hostile to terminals and to UTF-8 encoders.

Every text it sends holds a lone surrogate (``\\ud800``, valid in JSON) and terminal escape sequences: an OSC
that sets the window title, a CSI that clears the screen, a C1 CSI (``\\x9b``), a carriage return, a bell.
Its tools: ``odd`` (``{key}``) answers :data:`ODD` after the key, with a log notification holding the same;
``echo`` (``{text}``) answers its text as it came; ``bad`` answers a tool error holding :data:`ODD`;
``crash`` writes :data:`ODD` on stderr, on two lines, and exits 3. Tool names and descriptions hold escapes
too. With ``--count-file F`` each call appends its tool and its key (as JSON) to ``F`` (the ground truth of what ran).
"""

import json
import sys

ODD = "odd\ud800 \x1b]0;pwned\x07title \x1b[2Jclear \x9b31mred\r\x08"
"""What every text of this server holds (written as JSON escapes: ``\\ud800``, ``\\u001b``...)."""

COUNT_FILE = sys.argv[sys.argv.index("--count-file") + 1] if "--count-file" in sys.argv else None

TOOLS = [
    {"name": name, "description": f"{name} \x1b]0;tool title\x07 {ODD}", "inputSchema": {"type": "object"}}
    for name in ("odd", "echo", "bad", "crash")
]
TOOLS.append({"name": "esc\x1b[2Jname", "title": "t\x1b[31m", "inputSchema": {"type": "object"}})


def send(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")  # ensure_ascii: a lone surrogate goes out as \ud800
    sys.stdout.flush()


def text(rid: object, value: str, *, is_error: bool = False) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": value}], "isError": is_error}})


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:
            continue
        if method == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "hostile\x1b[2J", "version": "1"},
            }
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            name = msg["params"].get("name")
            args = msg["params"].get("arguments") or {}
            key = str(args.get("key", args.get("text", "")))
            if COUNT_FILE:
                with open(COUNT_FILE, "a") as f:
                    f.write(f"{name} {json.dumps(key)}\n")  # the key exactly, as ASCII
            if name == "odd":
                params = {"level": "warning", "logger": "hostile\x1b[2J", "data": f"log {key} {ODD}"}
                send({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
                text(rid, f"{key} {ODD}")
            elif name == "echo":
                text(rid, str(args.get("text", "")))
            elif name == "bad":
                text(rid, f"bad {key} {ODD}", is_error=True)
            elif name == "crash":
                sys.stderr.write(f"crash {ODD}\nsecond line {ODD}\n")
                sys.stderr.flush()
                sys.exit(3)
            else:
                send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"no tool {ODD}"}})
        elif method == "logging/setLevel":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})


main()
