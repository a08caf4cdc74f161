"""Tasks in the 2026-07-28 revision: the ``io.modelcontextprotocol/tasks`` extension (SEP-2663), as pure
parsing and mapping (no I/O). The rules shared with 2025-11-25 (statuses, poll bounds, "not found" is -32602)
are :mod:`runner.protocol.tasks`'.

What differs from 2025-11-25:

- The client declares the extension in each request's capabilities
  (``_meta["io.modelcontextprotocol/clientCapabilities"].extensions``, :func:`declare`); the server declares it
  in ``server/discover`` (``capabilities.extensions``, :func:`server_takes_tasks`). There is no
  ``params.task`` and no per-tool ``taskSupport``: **the server decides** per request, so every ``tools/call``
  of a client that declared the extension may come back as a task.
- A task comes back as the result itself, marked ``resultType: "task"`` (:func:`is_task_result`); the ttl and
  poll interval are ``ttlMs`` and ``pollIntervalMs``.
- ``tasks/get`` carries the outcome of a terminal task (:func:`parse_detailed_task`): ``completed`` with
  ``result`` (a ``CallToolResult``, ``isError`` included), ``failed`` with ``error`` (a JSON-RPC error: the
  request failed as a protocol error would), ``cancelled``. There is no ``tasks/result``
  (:func:`outcome`).
- ``input_required`` lists the server's questions in ``inputRequests`` (keyed; the same key across polls is the
  same question: :func:`new_input_requests`); they are answered with ``tasks/update {taskId, inputResponses}``
  (:func:`update_params`). Answering them is a policy's job (``runner.engine.calls.task.InputHandler``).
- ``tasks/cancel`` is acknowledged with an empty result; ``notifications/cancelled`` must not be used for a
  task. Status may also be pushed as ``notifications/tasks`` (the same detailed task).
- Over Streamable HTTP, ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` carry the task id in the
  ``Mcp-Name`` header (:func:`routing_name`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from runner.errors import JsonRpcError, MalformedMessage
from runner.protocol.mcp import ToolResult, parse_tool_result
from runner.protocol.tasks import Task, TaskStatus, parse_task

__all__ = [
    "CLIENT_CAPABILITIES_META",
    "EXTENSION",
    "STATUS_NOTIFICATION",
    "TASK_METHODS",
    "declare",
    "is_task_result",
    "new_input_requests",
    "outcome",
    "parse_detailed_task",
    "routing_name",
    "server_takes_tasks",
    "update_params",
]

EXTENSION: Final = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES_META: Final = "io.modelcontextprotocol/clientCapabilities"
STATUS_NOTIFICATION: Final = "notifications/tasks"
TASK_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})


def declare(client_capabilities: dict[str, Any]) -> dict[str, Any]:
    """``client_capabilities`` (the per-request ones) with the extension declared; the argument is not
    changed."""
    extensions = client_capabilities.get("extensions")
    merged = {**(extensions if isinstance(extensions, dict) else {}), EXTENSION: {}}
    return {**client_capabilities, "extensions": merged}


def server_takes_tasks(capabilities: dict[str, Any]) -> bool:
    """Whether the server's capabilities (``server/discover``) declare the extension."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


def is_task_result(result: dict[str, Any]) -> bool:
    """Whether a ``tools/call`` result is a ``CreateTaskResult``. A missing ``resultType`` means complete."""
    return result.get("resultType") == "task"


def _renamed(raw: dict[str, Any]) -> dict[str, Any]:
    """The 2026 task's fields under the names :func:`runner.protocol.tasks.parse_task` reads."""
    out = dict(raw)
    out["ttl"] = raw.get("ttlMs")
    out["pollInterval"] = raw.get("pollIntervalMs")
    return out


def parse_detailed_task(raw: Any, *, where: str = "tasks/get") -> Task:
    """A task of ``tasks/get``, a ``CreateTaskResult`` or ``notifications/tasks``, with its outcome or its
    questions when its status carries them; ``MalformedMessage`` when a status lacks what it must carry."""
    if not isinstance(raw, dict):
        raise MalformedMessage(f"{where}: a task must be an object, got {raw!r:.100}")
    task = parse_task(_renamed(raw), where=where)
    status = task.status
    result = raw.get("result")
    error = raw.get("error")
    questions = raw.get("inputRequests")
    _check_carried(task, where, result=result, error=error, questions=questions)
    return replace(
        task,
        result=result if status is TaskStatus.COMPLETED else None,
        error=error if status is TaskStatus.FAILED else None,
        input_requests=questions if status is TaskStatus.INPUT_REQUIRED else None,
    )


def _check_carried(task: Task, where: str, *, result: Any, error: Any, questions: Any) -> None:
    """A completed task carries its result, a failed one its error; questions, when there, are an object."""
    if task.status is TaskStatus.COMPLETED and not isinstance(result, dict):
        raise MalformedMessage(f"{where}: task {task.task_id} is completed but carries no 'result' object")
    if task.status is TaskStatus.FAILED and not isinstance(error, dict):
        raise MalformedMessage(f"{where}: task {task.task_id} failed but carries no 'error' object")
    if questions is not None and not isinstance(questions, dict):
        raise MalformedMessage(f"{where}: task {task.task_id} 'inputRequests' must be an object")


def outcome(task: Task) -> ToolResult:
    """The call's result from a terminal task: ``completed`` gives its ``CallToolResult`` (a tool error stays
    one), ``failed`` raises the ``JsonRpcError`` it carries (the call failed as a protocol error would).
    ``ValueError`` for a task that has no outcome (working, input required, cancelled)."""
    if task.status is TaskStatus.COMPLETED and task.result is not None:
        return parse_tool_result(task.result)
    if task.status is TaskStatus.FAILED and task.error is not None:
        code = task.error.get("code")
        message = task.error.get("message")
        raise JsonRpcError(
            code if isinstance(code, int) and not isinstance(code, bool) else -32603,
            message if isinstance(message, str) else (task.status_message or "the task failed"),
            task.error.get("data"),
            method="tools/call",
        )
    raise ValueError(f"task {task.task_id} is {task.status.value}: it has no result")


def new_input_requests(task: Task, seen: set[str]) -> dict[str, Any]:
    """The questions of ``task`` not seen before (keys are unique over a task's life), adding their keys to
    ``seen``."""
    fresh = {key: value for key, value in (task.input_requests or {}).items() if key not in seen}
    seen.update(fresh)
    return fresh


def update_params(task_id: str, input_responses: dict[str, Any]) -> dict[str, Any]:
    """The params of ``tasks/update``: the answers, keyed as the questions were."""
    return {"taskId": task_id, "inputResponses": input_responses}


def routing_name(method: str, params: dict[str, Any] | None) -> str | None:
    """The ``Mcp-Name`` header of a task request (its task id); None for other methods."""
    if method not in TASK_METHODS or not isinstance(params, dict):
        return None
    task_id = params.get("taskId")
    return task_id if isinstance(task_id, str) else None
