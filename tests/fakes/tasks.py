"""Tasks (2025-11-25) for :class:`tests.fakes.server.FakeServer`: give the server ``tasks=FakeTasks(...)``.

A task-augmented ``tools/call`` of a tool with task support starts the tool's handler in the background and
answers ``{"task": ...}`` at once; ``tasks/get``, ``tasks/result`` and ``tasks/cancel`` answer from the
table. The handler's ``call.task`` lets it set a status and message on the way; its result ends the task
(``failed`` when ``isError``). Tests read ``gets`` (the virtual times of each ``tasks/get``), ``cancels``,
``executions`` and can ``forget()`` every task (a server that lost them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from runner.protocol.jsonrpc import ErrorResponse, Request

if TYPE_CHECKING:
    from tests.fakes.server import FakeServer

TERMINAL = ("completed", "failed", "cancelled")


@dataclass
class FakeTask:
    task_id: str
    ttl: int | None
    poll_interval: int | None
    status: str = "working"
    message: str | None = None
    result: dict[str, Any] | None = None
    done: trio.Event = field(default_factory=trio.Event)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)

    def set(self, status: str, message: str | None = None) -> None:
        self.status = status
        self.message = message

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z",
            "ttl": self.ttl,
        }
        if self.poll_interval is not None:
            out["pollInterval"] = self.poll_interval
        if self.message is not None:
            out["statusMessage"] = self.message
        return out


@dataclass
class FakeTasks:
    support: dict[str, str] = field(default_factory=dict)  # tool name -> taskSupport
    poll_interval: int | None = 500  # ms, None: the server suggests none
    ttl: int | None = None  # ms the server keeps a task; None: what the client asked
    tasks: dict[str, FakeTask] = field(default_factory=dict)
    gets: list[tuple[float, str]] = field(default_factory=list)
    cancels: list[str] = field(default_factory=list)
    executions: Counter[str] = field(default_factory=Counter)
    augmented: list[str] = field(default_factory=list)  # tools called with params.task

    def capabilities(self) -> dict[str, Any]:
        return {"tasks": {"requests": {"tools": {"call": {}}}, "cancel": {}}}

    def forget(self) -> None:
        self.tasks.clear()

    async def handle(self, server: FakeServer, request: Request, nursery: trio.Nursery) -> Any:
        """The reply to ``request`` if it is the tasks', else ``NotImplemented``."""
        params = request.params or {}
        if request.method == "tools/call" and isinstance(params.get("task"), dict):
            return await self._create(server, request, nursery)
        if request.method not in ("tasks/get", "tasks/result", "tasks/cancel"):
            return NotImplemented
        task = self.tasks.get(str(params.get("taskId")))
        if task is None:
            return ErrorResponse(request.id, -32602, f"task {params.get('taskId')!r} not found")
        if request.method == "tasks/get":
            self.gets.append((trio.current_time(), task.task_id))
            return task.wire()
        if request.method == "tasks/cancel":
            self.cancels.append(task.task_id)
            if task.status not in TERMINAL:
                task.scope.cancel()
                task.set("cancelled", "cancelled by the client")
                task.done.set()
            return task.wire()
        await task.done.wait()
        if task.status == "cancelled":
            return ErrorResponse(request.id, -32000, "task cancelled")
        return task.result

    async def _create(self, server: FakeServer, request: Request, nursery: trio.Nursery) -> Any:
        from tests.fakes.server import FakeCall

        params = request.params or {}
        name = str(params.get("name"))
        handler = server.tools.get(name)
        if handler is None:
            return ErrorResponse(request.id, -32602, f"unknown tool {name}")
        self.augmented.append(name)
        asked = params["task"].get("ttl")
        task = FakeTask(f"task-{len(self.tasks) + 1}", self.ttl if self.ttl is not None else asked, self.poll_interval)
        self.tasks[task.task_id] = task
        call = FakeCall(server, request, task=task)

        async def run() -> None:
            with task.scope:
                self.executions[name] += 1
                reply = await handler(call)
                if isinstance(reply, dict):
                    task.result = reply
                    task.set("failed" if reply.get("isError") else "completed", task.message)
                else:
                    task.set("failed", "the tool failed")
                    task.result = {"content": [{"type": "text", "text": "failed"}], "isError": True}
                task.done.set()

        nursery.start_soon(run)
        return {"task": task.wire()}
