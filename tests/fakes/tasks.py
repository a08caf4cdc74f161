"""Tasks (2025-11-25) for :class:`tests.fakes.server.FakeServer`: give the server ``tasks=FakeTasks(...)``.

A task-augmented ``tools/call`` of a tool with task support starts the tool's handler in the background and
answers ``{"task": ...}`` at once; ``tasks/get``, ``tasks/result`` and ``tasks/cancel`` answer from the
table. The handler's ``call.task`` lets it set a status and message on the way; its result ends the task
(``failed`` when ``isError``). Tests read ``gets`` (the virtual times of each ``tasks/get``), ``cancels``,
``executions`` and can ``forget()`` every task (a server that lost them).

``era="2026"`` speaks the ``io.modelcontextprotocol/tasks`` extension instead: the capability under
``extensions``; a ``tools/call`` whose ``_meta`` declares the extension becomes a task (``resultType: "task"``;
``params.task`` means nothing); ``tasks/get`` carries ``result`` (``isError`` too) or, for a handler that
answers a JSON-RPC error, ``error``; ``ttlMs`` and ``pollIntervalMs``; no ``tasks/result``; ``tasks/cancel``
answers an empty acknowledgement.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from runner.protocol.jsonrpc import ErrorResponse, Request
from runner.protocol.tasks2026 import CLIENT_CAPABILITIES_META, EXTENSION

if TYPE_CHECKING:
    from tests.fakes.server import FakeServer

TERMINAL = ("completed", "failed", "cancelled")


@dataclass
class FakeTask:
    task_id: str
    ttl: int | None
    poll_interval: int | None
    era: str = "2025"
    status: str = "working"
    message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    done: trio.Event = field(default_factory=trio.Event)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    input_requests: dict[str, Any] | None = None  # 2026: the questions of an input_required task
    answers: dict[str, Any] = field(default_factory=dict)  # 2026: what tasks/update answered, by key
    answered: trio.Event = field(default_factory=trio.Event)

    def set(self, status: str, message: str | None = None) -> None:
        self.status = status
        self.message = message

    async def ask(self, questions: dict[str, Any]) -> dict[str, Any]:
        """2026: turn ``input_required`` with ``questions`` (key -> {method, params}) until ``tasks/update``
        answers them; back to ``working``, returning the answers."""
        self.input_requests, self.answered = questions, trio.Event()
        self.set("input_required", "needs an answer")
        await self.answered.wait()
        self.input_requests = None
        self.set("working")
        return {key: self.answers[key] for key in questions}

    def wire(self) -> dict[str, Any]:
        modern = self.era == "2026"
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z",
            "ttlMs" if modern else "ttl": self.ttl,
        }
        if self.poll_interval is not None:
            out["pollIntervalMs" if modern else "pollInterval"] = self.poll_interval
        if self.message is not None:
            out["statusMessage"] = self.message
        if modern and self.status == "input_required" and self.input_requests is not None:
            out["inputRequests"] = self.input_requests
        if modern and self.status == "completed":
            out["result"] = self.result
        if modern and self.status == "failed":
            out["error"] = self.error
        return out


@dataclass
class FakeTasks:
    support: dict[str, str] = field(default_factory=dict)  # tool name -> taskSupport (2026: the tools made tasks)
    era: str = "2025"
    poll_interval: int | None = 500  # ms, None: the server suggests none
    ttl: int | None = None  # ms the server keeps a task; None: what the client asked
    tasks: dict[str, FakeTask] = field(default_factory=dict)
    gets: list[tuple[float, str]] = field(default_factory=list)
    cancels: list[str] = field(default_factory=list)
    executions: Counter[str] = field(default_factory=Counter)
    augmented: list[str] = field(default_factory=list)  # tools called with params.task
    runner: trio.Nursery | None = None  # where tasks run (default: the server's nursery, which dies with it)

    def capabilities(self) -> dict[str, Any]:
        if self.era == "2026":
            return {"extensions": {EXTENSION: {}}}
        return {"tasks": {"requests": {"tools": {"call": {}}}, "cancel": {}}}

    def _asks_for_a_task(self, params: dict[str, Any]) -> bool:
        if self.era == "2026":
            meta = params.get("_meta") or {}
            declared = (meta.get(CLIENT_CAPABILITIES_META) or {}).get("extensions") or {}
            return EXTENSION in declared and params.get("name") in self.support
        return isinstance(params.get("task"), dict)

    def forget(self) -> None:
        self.tasks.clear()

    async def handle(self, server: FakeServer, request: Request, nursery: trio.Nursery) -> Any:
        """The reply to ``request`` if it is the tasks', else ``NotImplemented``."""
        params = request.params or {}
        if request.method == "tools/call" and self._asks_for_a_task(params):
            return await self._create(server, request, nursery)
        if request.method not in ("tasks/get", "tasks/result", "tasks/cancel", "tasks/update"):
            return NotImplemented
        if request.method == "tasks/result" and self.era == "2026":
            return ErrorResponse(request.id, -32601, "no tasks/result in 2026-07-28")
        task = self.tasks.get(str(params.get("taskId")))
        if task is None:
            return ErrorResponse(request.id, -32602, f"task {params.get('taskId')!r} not found")
        if request.method == "tasks/get":
            self.gets.append((trio.current_time(), task.task_id))
            return task.wire()
        if request.method == "tasks/update":
            responses = params.get("inputResponses")
            if not isinstance(responses, dict) or self.era != "2026":
                return ErrorResponse(request.id, -32602, "tasks/update needs inputResponses (2026 only)")
            task.answers.update(responses)
            if task.input_requests is not None and all(k in task.answers for k in task.input_requests):
                task.answered.set()
            return {}
        if request.method == "tasks/cancel":
            self.cancels.append(task.task_id)
            if task.status not in TERMINAL:
                task.scope.cancel()
                task.set("cancelled", "cancelled by the client")
                task.done.set()
            return {} if self.era == "2026" else task.wire()
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
        asked = params["task"].get("ttl") if isinstance(params.get("task"), dict) else 3_600_000
        ttl = self.ttl if self.ttl is not None else asked
        task = FakeTask(f"task-{len(self.tasks) + 1}", ttl, self.poll_interval, self.era)
        self.tasks[task.task_id] = task
        call = FakeCall(server, request, task=task)

        async def run() -> None:
            with task.scope:
                self.executions[name] += 1
                reply = await handler(call)
                if isinstance(reply, dict):
                    task.result = reply
                    failed = reply.get("isError") and self.era != "2026"  # 2026: a tool error completes
                    task.set("failed" if failed else "completed", task.message)
                elif isinstance(reply, ErrorResponse):
                    task.error = {"code": reply.code, "message": reply.message}
                    task.set("failed", reply.message)
                else:
                    task.set("failed", "the tool failed")
                    task.result = {"content": [{"type": "text", "text": "failed"}], "isError": True}
                task.done.set()

        (self.runner or nursery).start_soon(run)
        if self.era == "2026":
            return {"resultType": "task", **task.wire()}
        return {"task": task.wire()}
