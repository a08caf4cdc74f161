"""Tasks of 2026-07-28 (the ``io.modelcontextprotocol/tasks`` extension) as a
:class:`~runner.session.tasks.TaskWire`: the wire rules are :mod:`runner.protocol.tasks2026`'s.

The server decides whether a call becomes a task, so :meth:`Tasks2026.start` sends a plain ``tools/call``
declaring the extension in the request's client capabilities and takes either answer. The outcome comes with
``tasks/get`` (no ``tasks/result``). The declaration goes in ``params._meta`` here; a session of the 2026 era
that builds every request's ``_meta`` itself must merge :func:`runner.protocol.tasks2026.declare` into the
capabilities it sends with ``tools/call`` and ``tasks/*`` instead. No progress token is asked for: the
extension does not carry progress on tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from runner.errors import MalformedMessage
from runner.protocol.mcp import ToolResult, parse_tool_result
from runner.protocol.tasks import Task, TaskMode, TaskStatus
from runner.protocol.tasks2026 import (
    CLIENT_CAPABILITIES_META,
    declare,
    is_task_result,
    outcome,
    parse_detailed_task,
    server_takes_tasks,
)
from runner.session.results import complete_result
from runner.session.session import Session
from runner.session.tasks import StartTask, TaskCallOptions, cancel_task, get_task, send_task_call

__all__ = ["TASKS_2026", "Tasks2026"]


def _meta() -> dict[str, Any]:
    # The session's era adds these to the client's capabilities (ModernEra.stamp merges them).
    return {CLIENT_CAPABILITIES_META: declare({})}


class Tasks2026:
    """Tasks of 2026-07-28 (see the module docstring)."""

    era = "2026-07-28"

    def offered(self, capabilities: dict[str, Any]) -> bool:
        return server_takes_tasks(capabilities)

    def wants(self, capabilities: dict[str, Any], task_support: str, mode: TaskMode) -> bool:
        """Declare the extension whenever the server does, unless tasks are ``off`` (the server decides)."""
        return server_takes_tasks(capabilities) and mode == "auto"

    @property
    def start(self) -> StartTask:
        """A plain ``tools/call`` declaring the extension: the server decides whether it becomes a task."""
        return _start

    async def get(self, session: Session, task_id: str, *, timeout: float | None) -> Task:
        return await get_task(session, task_id, timeout=timeout, meta=_meta(), parse=parse_detailed_task)

    async def result(self, session: Session, task: Task, *, timeout: float | None) -> ToolResult:
        if task.result is None and task.error is None:  # a seed state that was already terminal: ask
            task = await self.get(session, task.task_id, timeout=timeout)
        if task.status is TaskStatus.CANCELLED or not task.status.terminal:
            raise MalformedMessage(f"{session.name}: task {task.task_id} is {task.status.value}: it has no result")
        try:
            return outcome(task)
        except MalformedMessage as exc:
            raise MalformedMessage(f"{session.name}: task {task.task_id} result: {exc}") from None

    async def cancel(self, session: Session, task_id: str) -> str | None:
        return await cancel_task(session, task_id, meta=_meta())


async def _start(
    session: Session, name: str, arguments: Mapping[str, Any] | None, options: TaskCallOptions
) -> Task | ToolResult:
    params = {"name": name, "arguments": dict(arguments) if arguments is not None else {}, "_meta": _meta()}
    return await send_task_call(session, params, _task_or_result, options, progress=False)


def _task_or_result(result: dict[str, Any], server: str) -> Task | ToolResult:
    if is_task_result(result):
        return parse_detailed_task(result, where="tools/call")
    return parse_tool_result(complete_result("tools/call", result, server=server))


TASKS_2026: Final = Tasks2026()
