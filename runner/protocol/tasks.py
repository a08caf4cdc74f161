"""Tasks: durable tool calls, as wire types and pure rules (no I/O).

A server that supports tasks answers a task-augmented ``tools/call`` with a task id at once and runs the
tool in the background; the client polls the task and fetches its result. A task id outlives the
connection and the client: mcp-run journals it, and a resumed run collects the result instead of calling
the tool again (see :mod:`runner.engine.calls.task`).

Two eras speak it:

- **2025-11-25** (experimental, this module's default): the server declares ``capabilities.tasks.requests.
  tools.call``; each tool says ``execution.taskSupport`` (``forbidden``, ``optional``, ``required``). The
  client adds ``params.task: {ttl}`` and gets ``CreateTaskResult {task}``; it polls ``tasks/get`` (the task's
  fields at the top of the result), fetches ``tasks/result`` once the task is terminal, and may send
  ``tasks/cancel``. An unknown or expired task id is a -32602 error.
- **2026-07-28** (the ``io.modelcontextprotocol/tasks`` extension): see :mod:`runner.protocol.tasks2026`.

When mcp-run asks for a task (:func:`wants_task`): only when the server declares the capability; always for a
``required`` tool; for an ``optional`` tool too unless the mode is ``off``, because a task id makes the call
recoverable after a crash. Never for a ``forbidden`` tool.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any, Final, Literal

from runner.errors import MalformedMessage

__all__ = [
    "CLIENT_TASKS_CAPABILITY",
    "DEFAULT_POLL_INTERVAL",
    "DEFAULT_TTL_MS",
    "MAX_POLL_INTERVAL",
    "MIN_POLL_INTERVAL",
    "TASK_NOT_FOUND",
    "Task",
    "TaskMode",
    "TaskStatus",
    "is_task_result",
    "parse_create_task_result",
    "parse_task",
    "poll_delay",
    "server_takes_tasks",
    "task_params",
    "wants_task",
]

TaskMode = Literal["auto", "off"]
"""``auto``: ask for a task whenever the server and the tool allow it; ``off``: only when the tool requires it."""

CLIENT_TASKS_CAPABILITY: Final[dict[str, Any]] = {}
"""What mcp-run declares as ``capabilities.tasks``: that it speaks tasks. It lists no ``requests`` (it does
not run the server's requests as tasks of its own), and no ``list`` or ``cancel`` (it holds no tasks a server
could list or cancel)."""

DEFAULT_TTL_MS: Final = 24 * 3600 * 1000
"""The ttl mcp-run asks for: a day, so that a run resumed the next morning still finds its results."""
DEFAULT_POLL_INTERVAL: Final = 1.0
"""Seconds between polls when the server suggests no ``pollInterval``."""
MIN_POLL_INTERVAL: Final = 0.05
MAX_POLL_INTERVAL: Final = 30.0
"""Bounds on the interval a server suggests: a zero never makes a busy loop, an hour never hides a result."""
TASK_NOT_FOUND: Final = -32602
"""The error code of ``tasks/get`` (and the others) for a task id the server does not know (or no longer)."""


class TaskStatus(enum.StrEnum):
    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED)


@dataclass(frozen=True, slots=True)
class Task:
    """A task as the server described it. ``ttl_ms``: how long after ``created_at`` the server keeps it (None:
    as long as it likes); ``poll_interval_ms``: the server's suggestion. ``result`` / ``error``: the outcome,
    when the era carries it in the task itself (2026: ``tasks/get`` of a terminal task); ``input_requests``: the
    server's outstanding questions (2026, ``input_required``)."""

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None


def _number(raw: dict[str, Any], name: str, where: str) -> int | None:
    value = raw.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise MalformedMessage(f"{where}: task {name!r} must be a non-negative number, got {value!r:.100}")
    return int(value)


def _text(raw: dict[str, Any], name: str, where: str) -> str | None:
    value = raw.get(name)
    if value is None or isinstance(value, str):
        return value
    raise MalformedMessage(f"{where}: task {name!r} must be a string, got {value!r:.100}")


def parse_task(raw: Any, *, where: str = "tasks/get") -> Task:
    """A task object (``taskId``, ``status``, ...); ``MalformedMessage`` saying what is wrong with it."""
    if not isinstance(raw, dict):
        raise MalformedMessage(f"{where}: a task must be an object, got {raw!r:.100}")
    task_id = raw.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise MalformedMessage(f"{where}: a task must have a non-empty string 'taskId', got {task_id!r:.100}")
    status = raw.get("status")
    try:
        parsed = TaskStatus(str(status)) if isinstance(status, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise MalformedMessage(f"{where}: task {task_id!r} has an unknown status {status!r:.60}")
    return Task(
        task_id=task_id,
        status=parsed,
        status_message=_text(raw, "statusMessage", where),
        created_at=_text(raw, "createdAt", where),
        last_updated_at=_text(raw, "lastUpdatedAt", where),
        ttl_ms=_number(raw, "ttl", where),
        poll_interval_ms=_number(raw, "pollInterval", where),
    )


def is_task_result(result: dict[str, Any]) -> bool:
    """Whether a ``tools/call`` result is a 2025 ``CreateTaskResult`` (a server may answer a task-augmented
    call with a plain result: it ran the tool at once)."""
    return isinstance(result.get("task"), dict) and "content" not in result


def parse_create_task_result(result: dict[str, Any]) -> Task:
    return parse_task(result.get("task"), where="tools/call")


def task_params(ttl_ms: int = DEFAULT_TTL_MS) -> dict[str, Any]:
    """The ``params.task`` of a task-augmented request."""
    return {"ttl": ttl_ms}


def server_takes_tasks(capabilities: dict[str, Any]) -> bool:
    """Whether the server declared ``tasks.requests.tools.call``."""
    tasks = capabilities.get("tasks")
    requests = tasks.get("requests") if isinstance(tasks, dict) else None
    tools = requests.get("tools") if isinstance(requests, dict) else None
    return isinstance(tools, dict) and isinstance(tools.get("call"), dict)


def wants_task(capabilities: dict[str, Any], task_support: str, mode: TaskMode = "auto") -> bool:
    """Whether to ask for a task (see the module docstring). A ``required`` tool of a server without the
    capability is called plainly: the server is wrong one way or the other, and its answer says how."""
    if not server_takes_tasks(capabilities):
        return False
    if task_support == "required":
        return True
    return task_support == "optional" and mode == "auto"


def poll_delay(task: Task) -> float:
    """Seconds to wait before the next poll: the server's ``pollInterval`` within the bounds, else the
    default."""
    if task.poll_interval_ms is None:
        return DEFAULT_POLL_INTERVAL
    return min(max(task.poll_interval_ms / 1000, MIN_POLL_INTERVAL), MAX_POLL_INTERVAL)
