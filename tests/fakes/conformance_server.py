"""A stdlib MCP server over stdio for the executors' conformance test: one ``act`` tool whose behaviour is
chosen by the key it is given, so one server serves every scenario of the table and each executor sees the
same answers.

``act {key}`` first appends ``key`` to ``--count-file`` (flushed and synced: the ground truth of what ran,
read by the test per key), then:

- a key starting with ``err`` answers a tool error (``isError: true``);
- a key starting with ``doubt`` exits without answering the first time it is executed (the call was
  dispatched and ran, the connection is cut before its answer: in doubt), and answers as any key after;
- any other key answers its own text.

``ran {key}`` (read-only: a reconcile tool) answers ``{"ran": BOOL}`` as JSON text: whether ``act`` executed
``key`` (the count file); it records nothing.

With ``--refuse`` the server refuses every connection: it appends ``!refused`` to the count file and exits
with code 3 at ``initialize`` (nothing is ever sent to it; the test counts how many times it was started).

The tool has no annotations: it is not safe to repeat, so neither executor calls an item in doubt again
without a decision.
"""

import argparse
import json
import os
import sys
from pathlib import Path

_options = argparse.ArgumentParser()
_options.add_argument("--count-file", required=True)
_options.add_argument("--refuse", action="store_true")
OPTIONS = _options.parse_args()

TOOLS = [
    {"name": "act", "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}}},
    {"name": "ran", "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}}},
]


def send(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def record(key: str) -> int:
    """Append ``key`` to the count file; how many times it was executed before this one."""
    path = Path(OPTIONS.count_file)
    before = path.read_text().split().count(key) if path.exists() else 0
    with path.open("a") as file:
        file.write(key + "\n")
        file.flush()
        os.fsync(file.fileno())
    return before


def act(rid: object, key: str) -> None:
    before = record(key)
    if key.startswith("doubt") and before == 0:
        sys.exit(1)  # executed, never answered: the client cannot know whether it ran
    content = [{"type": "text", "text": key}]
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": content, "isError": key.startswith("err")}})


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:
            continue
        if method == "initialize":
            if OPTIONS.refuse:
                record("!refused")
                sys.stderr.write("fatal: refusing every client\n")
                sys.exit(3)
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "conformance"},
            }
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        elif method == "tools/call" and msg["params"].get("name") == "act":
            act(rid, str(msg["params"].get("arguments", {}).get("key", "")))
        elif method == "tools/call" and msg["params"].get("name") == "ran":
            path = Path(OPTIONS.count_file)
            key = str(msg["params"].get("arguments", {}).get("key", ""))
            ran = key in (path.read_text().split() if path.exists() else [])
            send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {"content": [{"type": "text", "text": json.dumps({"ran": ran})}]},
                }
            )
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})


main()
