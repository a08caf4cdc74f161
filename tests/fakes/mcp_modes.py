"""A tiny stdlib MCP server over stdio whose behaviour is chosen by argv[1], for end-to-end CLI tests.

Modes: ``ok`` (echo tool), ``protocol-error`` (tools/call answers a JSON-RPC error), ``tool-error``,
``die-on-call`` (exits after reading a tools/call), ``die-on-init`` (exits with stderr during initialize),
``die-on-list`` (exits with stderr on tools/list),
``garbage`` (prints non-JSON lines and an answer to an unknown id before each real answer), ``silent``
(never answers tools/call), ``wrong-ids`` (prints a line of noise, then answers tools/call under the id's
string form: ``"7"`` for ``7``), ``bad-version`` (answers initialize with a version nobody speaks), ``huge``
(answers tools/call with a line over 2 MiB), ``typed`` (lists the tools of :data:`TYPED_TOOLS`, with stricter
schemas; its calls echo their arguments as JSON text, and with ``--count-file`` write the tool's name and
them as a line there), ``progress`` (as ``ok``, after a progress notification and two log messages, debug
and warning, per call; with ``--delay S``, a second progress notification S seconds later), ``flood`` (as
``ok``, after ``--flood N`` progress notifications and ``N`` info log messages per call; with ``--count-file``,
the text is written there once the flood is sent), ``deaf`` (answers
initialize, then never reads stdin again nor answers; exits when its parent is gone), ``meta`` (the echo answers
with the ``traceparent`` its request carried in ``params._meta``, or ``none``).

``count`` serves a ``count`` tool (``{key}``) that records each execution as a line in ``--count-file``
(the ground truth of what ran), answers a tool error for the keys listed in ``--fail`` (comma-separated) the
first time it sees them (a failing-then-succeeding tool), and with ``--gate PATH`` waits for that file to
exist before executing (a test holds calls in flight with it); with ``--hold PATH``, it executes each call, then
waits for that file before answering (a call that happened, its answer held). A server whose parent died stops
waiting (and exits).

``--die-once KEYS`` (``count``): a listed key's first execution is made, then the server exits before it answers
(the call happened, its outcome unknown to the client); ``--lose-once KEYS``: the server exits on a listed key's
first call before executing it (it never happened). ``was_counted`` (``{key}``) answers ``{"counted": BOOL}`` as JSON
text from the ``--count-file`` (a reconcile tool).

``--echo-progress`` (``progress``): the progress messages end with the call's ``text``.
``--answer-after S`` (any mode): each tools/call is answered S seconds after it is read (a slow server).
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
_options = argparse.ArgumentParser()
_options.add_argument("--count-file")
_options.add_argument("--fail", default="")
_options.add_argument("--gate")
_options.add_argument("--hold")
_options.add_argument("--delay", type=float, default=0.0)
_options.add_argument("--flood", type=int, default=0)
_options.add_argument("--answer-after", type=float, default=0.0)
_options.add_argument("--echo-progress", action="store_true")
_options.add_argument("--die-once", default="")
_options.add_argument("--lose-once", default="")
OPTIONS = _options.parse_args(sys.argv[2:])
PARENT = os.getppid()


def send(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def wait_for(gate: str) -> None:
    """Until the file ``gate`` exists; the server exits when its client is gone (nobody will open it)."""
    while not os.path.exists(gate):
        if os.getppid() != PARENT:
            sys.exit(0)
        time.sleep(0.005)  # a test double polling a file the test creates


def count(key: str) -> bool:
    """Execute the ``count`` tool once; False when it fails (a listed key seen for the first time). Nothing once
    the client is gone (a call read before it died, not executed yet, never is)."""
    if os.getppid() != PARENT:
        sys.exit(0)
    if OPTIONS.gate:
        wait_for(OPTIONS.gate)
    path = Path(OPTIONS.count_file)
    seen = path.read_text().split() if path.exists() else []
    with path.open("a") as file:
        file.write(key + "\n")
        file.flush()
        os.fsync(file.fileno())
    if OPTIONS.hold:
        wait_for(OPTIONS.hold)
    return not (key in OPTIONS.fail.split(",") and key not in seen)


# ``typed``: tools with stricter schemas, for checking arguments before a run.
READ_ONLY = {"readOnlyHint": True}
TYPED_TOOLS = [
    {
        "name": "convert",
        "annotations": READ_ONLY,
        "inputSchema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "out_dir": {"type": "string"},
                "count": {"type": "integer", "minimum": 1},
            },
            "required": ["path", "out_dir"],
            "additionalProperties": False,
        },
    },
    {
        "name": "get_current_time",
        "annotations": READ_ONLY,
        "inputSchema": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]},
    },
    {"name": "convert_time", "annotations": READ_ONLY, "inputSchema": {"type": "object"}},
    {
        "name": "broken",
        "annotations": READ_ONLY,
        "inputSchema": {"type": "object", "properties": {"a": {"type": "bogus"}}},
    },
    {
        # (x+x+)+y on a long run of x's with no y backtracks for ever
        "name": "backtracks",
        "annotations": READ_ONLY,
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string", "pattern": "(x+x+)+y"}}},
    },
]


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
            if MODE == "deaf":  # answered initialize; reads nothing more, answers nothing more
                while os.getppid() == PARENT:
                    time.sleep(0.05)
                sys.exit(0)
        elif method == "tools/list":
            if MODE == "die-on-list":
                sys.stderr.write("fatal: out of memory\n")
                sys.exit(1)
            if MODE == "typed":
                send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TYPED_TOOLS}})
                continue
            send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {
                        "tools": [
                            {"name": "count", "inputSchema": {"type": "object", "properties": {"key": {}}}},
                            {"name": "was_counted", "inputSchema": {"type": "object", "properties": {"key": {}}}},
                            {
                                "name": "echo",
                                "inputSchema": {
                                    "type": "object",
                                    "properties": {"text": {"type": "string"}},
                                    "required": ["text"],
                                },
                            },
                        ]
                    },
                }
            )
        elif method == "tools/call":
            if OPTIONS.answer_after:
                time.sleep(OPTIONS.answer_after)  # a slow server: one call at a time, each this long
            if MODE == "die-on-call":
                sys.exit(1)
            if MODE == "silent":
                continue
            if MODE == "garbage":
                sys.stdout.write("DEBUG: starting work\n")
                send({"jsonrpc": "2.0", "id": 999999, "result": {"content": []}})
            if MODE == "wrong-ids":  # a line of noise, then the answer under the string form of the id
                sys.stdout.write(f"working on {rid}\n")
                send({"jsonrpc": "2.0", "id": str(rid), "result": {"content": []}})
                continue
            if MODE == "progress":  # a progress notification and a log message before the echo's answer
                token = (msg["params"].get("_meta") or {}).get("progressToken")
                text = msg["params"]["arguments"].get("text", "")
                echo = f": {text}" if OPTIONS.echo_progress else ""
                if token is not None:
                    note = {"progressToken": token, "progress": 1, "total": 2, "message": f"half way{echo}"}
                    send({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
                for level in ("debug", "warning"):
                    log = {"level": level, "logger": "modes", "data": f"{level} about {text}"}
                    send({"jsonrpc": "2.0", "method": "notifications/message", "params": log})
                if token is not None and OPTIONS.delay:  # a slow call: more progress after --delay seconds
                    time.sleep(OPTIONS.delay)
                    note = {"progressToken": token, "progress": 2, "total": 2, "message": f"done{echo}"}
                    send({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
            if MODE == "flood":  # N progress notifications and N log messages, then the echo's answer
                token = (msg["params"].get("_meta") or {}).get("progressToken")
                for i in range(OPTIONS.flood):
                    if token is not None:
                        note = {"progressToken": token, "progress": i + 1, "total": OPTIONS.flood}
                        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
                    log = {"level": "info", "logger": "modes", "data": f"line {i} of a flood"}
                    send({"jsonrpc": "2.0", "method": "notifications/message", "params": log})
                if OPTIONS.count_file:  # the call was executed: its text goes to the ground truth
                    count(msg["params"]["arguments"].get("text", ""))
            if MODE == "count" and msg["params"].get("name") == "was_counted":
                key = str(msg["params"]["arguments"].get("key", ""))
                path = Path(OPTIONS.count_file)
                counted = key in (path.read_text().split() if path.exists() else [])
                content = [{"type": "text", "text": json.dumps({"counted": counted})}]
                send({"jsonrpc": "2.0", "id": rid, "result": {"content": content}})
            elif MODE == "count" and msg["params"].get("name") == "count":
                key = str(msg["params"]["arguments"].get("key", ""))
                lost = Path(OPTIONS.count_file + ".lost")
                if key in OPTIONS.lose_once.split(",") and key not in (
                    lost.read_text().split() if lost.exists() else []
                ):
                    with lost.open("a") as file:
                        file.write(key + "\n")
                    sys.exit(1)  # before executing it: it never happened
                path = Path(OPTIONS.count_file)
                first = key not in (path.read_text().split() if path.exists() else [])
                ok = count(key)
                if key in OPTIONS.die_once.split(",") and first:
                    sys.exit(1)  # executed; the answer never goes out
                text = key if ok else f"{key}: failed on its first call"
                content = [{"type": "text", "text": text}]
                send({"jsonrpc": "2.0", "id": rid, "result": {"content": content, "isError": not ok}})
            elif MODE == "protocol-error":
                send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "Unknown tool: nope"}})
            elif MODE == "typed":
                text = json.dumps(msg["params"].get("arguments"), sort_keys=True)
                if OPTIONS.count_file:
                    with Path(OPTIONS.count_file).open("a") as file:
                        file.write(f"{msg['params'].get('name')} {text}\n")
                send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
            elif MODE == "meta":
                text = (msg["params"].get("_meta") or {}).get("traceparent", "none")
                send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
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
