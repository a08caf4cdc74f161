"""A stdlib MCP server over stdio whose one tool, ``work`` (``{key}``), runs only as a task (2025-11-25), for
the crash-then-collect end-to-end tests.

A task is "done" ``--delay`` seconds after it was created: its state is a line of the ``--store`` file (JSON,
rewritten atomically), so a server started afresh (the client resumed after a crash) still knows every task
and finds those past their time completed. Each task created is an execution, recorded as the key's line in
``--count-file`` (fsynced before the answer): the ground truth of what ran. ``tasks/get``, ``tasks/result``,
``tasks/cancel`` as the specification says; an unknown task id is -32602.
"""

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path

_options = argparse.ArgumentParser()
_options.add_argument("--store", required=True)
_options.add_argument("--count-file", required=True)
_options.add_argument("--delay", type=float, default=2.0)
_options.add_argument("--poll-interval", type=int, default=200)
OPTIONS = _options.parse_args()
STORE = Path(OPTIONS.store)

TOOL = {
    "name": "work",
    "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    "execution": {"taskSupport": "required"},
}


def send(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def load() -> dict[str, dict]:
    return json.loads(STORE.read_text()) if STORE.exists() else {}


def save(tasks: dict[str, dict]) -> None:
    tmp = STORE.with_suffix(f".{os.getpid()}.tmp")
    with tmp.open("w") as file:
        json.dump(tasks, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, STORE)


def wire(task_id: str, task: dict) -> dict:
    status = task["status"]
    if status == "working" and time.time() >= task["started"] + OPTIONS.delay:
        status = "completed"
    return {
        "taskId": task_id,
        "status": status,
        "statusMessage": f"working on {task['key']}" if status == "working" else None,
        "createdAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(task["started"])),
        "lastUpdatedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "ttl": task["ttl"],
        "pollInterval": OPTIONS.poll_interval,
    }


def create(params: dict) -> dict:
    key = str(params.get("arguments", {}).get("key"))
    with open(OPTIONS.count_file, "a") as file:
        file.write(key + "\n")
        file.flush()
        os.fsync(file.fileno())
    tasks = load()
    task_id = str(uuid.uuid4())
    tasks[task_id] = {"key": key, "started": time.time(), "status": "working", "ttl": params["task"].get("ttl")}
    save(tasks)
    return {"task": wire(task_id, tasks[task_id])}


def answer(method: str, params: dict) -> tuple[dict | None, tuple[int, str] | None]:
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion"),
            "capabilities": {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}, "cancel": {}}},
            "serverInfo": {"name": "stdio-tasks", "version": "1"},
        }, None
    if method == "tools/list":
        return {"tools": [TOOL]}, None
    if method == "ping":
        return {}, None
    if method == "tools/call":
        if not isinstance(params.get("task"), dict):
            return None, (-32600, "work runs only as a task")
        return create(params), None
    if method in ("tasks/get", "tasks/result", "tasks/cancel"):
        tasks = load()
        task_id = str(params.get("taskId"))
        task = tasks.get(task_id)
        if task is None:
            return None, (-32602, f"task {task_id} not found")
        if method == "tasks/cancel":
            task["status"] = "cancelled"
            save(tasks)
            return wire(task_id, task), None
        if method == "tasks/get":
            return {k: v for k, v in wire(task_id, task).items() if v is not None}, None
        while wire(task_id, task)["status"] == "working":
            time.sleep(0.01)  # tasks/result blocks until the task ends
        if wire(task_id, task)["status"] == "cancelled":
            return None, (-32000, "task cancelled")
        return {"content": [{"type": "text", "text": f"done {task['key']}"}]}, None
    return None, (-32601, f"no method {method}")


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        result, error = answer(message["method"], message.get("params") or {})
        if error is not None:
            send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": error[0], "message": error[1]}})
        else:
            send({"jsonrpc": "2.0", "id": message["id"], "result": result})


main()
