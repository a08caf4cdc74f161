"""The requests of tasks (2025-11-25), on a :class:`~runner.session.Session`: start a tool call as a task,
poll it, fetch its result, cancel it. The wire types and rules are :mod:`runner.protocol.tasks`'; polling on
a clock, journaling and reconnecting are the engine's (:mod:`runner.engine.calls.task`).

``start_task_call`` returns a :class:`~runner.protocol.tasks.Task`, or a ``ToolResult`` when the server ran
the tool at once (a server may ignore ``params.task``). The other requests raise as ``Session.request``
does: a ``JsonRpcError`` with code -32602 (:data:`~runner.protocol.tasks.TASK_NOT_FOUND`) means the server
does not know the task (any more).

:class:`TaskWire` is what the engine polls through, one per era: :data:`TASKS_2025` here, ``TASKS_2026`` in
:mod:`.tasks2026` (the ``io.modelcontextprotocol/tasks`` extension).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol, TypeAlias

import trio

from runner.errors import MalformedMessage, McpRunError
from runner.protocol.mcp import ToolResult, parse_tool_result
from runner.protocol.tasks import (
    DEFAULT_TTL_MS,
    Task,
    TaskMode,
    TaskStatus,
    is_task_result,
    parse_create_task_result,
    parse_task,
    server_takes_tasks,
    task_params,
    wants_task,
)
from runner.session.options import BeforeSend, ProgressHandler
from runner.session.session import Session

__all__ = [
    "CANCEL_TIMEOUT",
    "TASKS_2025",
    "StartTask",
    "TaskCallOptions",
    "TaskWire",
    "Tasks2025",
    "cancel_task",
    "get_task",
    "send_task_call",
    "start_task_call",
    "task_result",
]

CANCEL_TIMEOUT: Final = 5.0


@dataclasses.dataclass(frozen=True, slots=True)
class TaskCallOptions:
    """How a ``tools/call`` that may become a task is sent, the same for every era: each field is passed
    unchanged to :meth:`Session.request` (``on_progress`` only where the era asks for progress), and
    ``timeout``, ``idle_timeout`` and ``on_progress`` to :meth:`Session.answer_input` too (a round of answers
    is the same call, journaled once: no ``before_send`` for it)."""

    timeout: float | None = None
    idle_timeout: float | None = None
    on_progress: ProgressHandler | None = None
    before_send: BeforeSend | None = None
    on_resumed: Callable[[str], None] | None = None


async def start_task_call(
    session: Session,
    name: str,
    arguments: Mapping[str, Any] | None,
    options: TaskCallOptions = TaskCallOptions(),
    *,
    ttl_ms: int = DEFAULT_TTL_MS,
) -> Task | ToolResult:
    """``tools/call`` with ``params.task``: the task the server created, or the result if it ran the tool at
    once."""
    params: dict[str, Any] = {
        "name": name,
        "arguments": dict(arguments) if arguments is not None else {},
        "task": task_params(ttl_ms),
    }
    return await send_task_call(session, params, _task_or_result, options, progress=True)


def _task_or_result(result: dict[str, Any], server: str) -> Task | ToolResult:
    return parse_create_task_result(result) if is_task_result(result) else parse_tool_result(result)


async def send_task_call(
    session: Session,
    params: dict[str, Any],
    parse: Callable[[dict[str, Any], str], Task | ToolResult],
    options: TaskCallOptions,
    *,
    progress: bool,
) -> Task | ToolResult:
    """The ``tools/call`` of a call that may become a task, each era's :meth:`TaskWire.start`: ``params`` as the
    era builds them, sent (journaled through ``before_send``), a 2026 ``input_required`` answer resolved as
    :meth:`Session.call_tool` resolves it in every era, and the raw result handed to the era's ``parse`` with
    the server's name (a ``MalformedMessage`` it raises is prefixed with it). ``progress``: ask for progress
    with a token (2025; the 2026 extension carries none on tasks: only rounds of answers report it, as a
    server may ask for input before it makes the call a task)."""
    result = await session.request(
        "tools/call",
        params,
        timeout=options.timeout,
        idle_timeout=options.idle_timeout,
        on_progress=options.on_progress if progress else None,
        before_send=options.before_send,
        on_resumed=options.on_resumed,
        progress=progress,
    )
    result = await session.answer_input(
        "tools/call",
        params,
        result,
        timeout=options.timeout,
        idle_timeout=options.idle_timeout,
        on_progress=options.on_progress,
    )
    try:
        return parse(result, session.name)
    except MalformedMessage as exc:
        raise MalformedMessage(f"{session.name}: {exc}") from None


async def get_task(
    session: Session,
    task_id: str,
    *,
    timeout: float | None,
    meta: dict[str, Any] | None = None,
    parse: Callable[[Any], Task] = parse_task,
) -> Task:
    """``tasks/get``: where the task stands, read by the era's ``parse`` (``meta``: the request's ``_meta``)."""
    params: dict[str, Any] = {"taskId": task_id} if meta is None else {"taskId": task_id, "_meta": meta}
    result = await session.request("tasks/get", params, timeout=timeout)
    try:
        task = parse(result)
    except MalformedMessage as exc:
        raise MalformedMessage(f"{session.name}: {exc}") from None
    if task.task_id != task_id:
        raise MalformedMessage(f"{session.name}: tasks/get for {task_id!r} answered about task {task.task_id!r}")
    return task


async def task_result(session: Session, task_id: str, *, timeout: float | None) -> ToolResult:
    """``tasks/result`` of a terminal task: what the call would have returned."""
    result = await session.request("tasks/result", {"taskId": task_id}, timeout=timeout)
    try:
        return parse_tool_result(result)
    except MalformedMessage as exc:
        raise MalformedMessage(f"{session.name}: tasks/result: {exc}") from None


async def cancel_task(session: Session, task_id: str, *, meta: dict[str, Any] | None = None) -> str | None:
    """``tasks/cancel``, bounded by ``CANCEL_TIMEOUT`` and shielded (it is sent while the call is being
    cancelled). Returns None when the server took it, else why not (it is only ever a courtesy: the item is
    in doubt either way)."""
    why: str | None = f"no answer within {CANCEL_TIMEOUT:g} s"
    with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_TIMEOUT):
        try:
            params: dict[str, Any] = {"taskId": task_id} if meta is None else {"taskId": task_id, "_meta": meta}
            await session.request("tasks/cancel", params, timeout=CANCEL_TIMEOUT)
            why = None
        except McpRunError as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return why


# A wire's start: (session, tool name, arguments, options) -> the task, or the result of a call run at once.
StartTask: TypeAlias = Callable[[Session, str, Mapping[str, Any] | None, TaskCallOptions], Awaitable[Task | ToolResult]]


class TaskWire(Protocol):
    """How one era speaks tasks (see the module docstring). ``result`` is the call's outcome from a terminal
    task that is not cancelled: a ``ToolResult`` (a failed 2025 task's is a tool error), or the
    ``JsonRpcError`` the task failed with."""

    era: str

    def offered(self, capabilities: dict[str, Any]) -> bool: ...

    def wants(self, capabilities: dict[str, Any], task_support: str, mode: TaskMode) -> bool: ...

    @property
    def start(self) -> StartTask:
        """Send the ``tools/call`` that may become a task: the task, or the result of a call run at once."""

    async def get(self, session: Session, task_id: str, *, timeout: float | None) -> Task: ...

    async def result(self, session: Session, task: Task, *, timeout: float | None) -> ToolResult: ...

    async def cancel(self, session: Session, task_id: str) -> str | None: ...


class Tasks2025:
    """Tasks of 2025-11-25: ``params.task`` on request, ``tasks/result`` for the outcome."""

    era = "2025-11-25"

    def offered(self, capabilities: dict[str, Any]) -> bool:
        return server_takes_tasks(capabilities)

    def wants(self, capabilities: dict[str, Any], task_support: str, mode: TaskMode) -> bool:
        return wants_task(capabilities, task_support, mode)

    start = staticmethod(start_task_call)

    async def get(self, session: Session, task_id: str, *, timeout: float | None) -> Task:
        return await get_task(session, task_id, timeout=timeout)

    async def result(self, session: Session, task: Task, *, timeout: float | None) -> ToolResult:
        result = await task_result(session, task.task_id, timeout=timeout)
        if task.status is TaskStatus.FAILED and not result.is_error:
            return dataclasses.replace(result, is_error=True)
        return result

    async def cancel(self, session: Session, task_id: str) -> str | None:
        return await cancel_task(session, task_id)


TASKS_2025: Final = Tasks2025()
