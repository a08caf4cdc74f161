"""A scripted MCP server over the in-memory transport, built on our own JSON-RPC core.

Tests give it tool handlers (``async def handler(call: FakeCall) -> dict``) and read back what it saw.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from runner.protocol.jsonrpc import ErrorResponse, Message, Notification, Request, Response
from runner.testing.memory import MemoryServerEnd
from tests.fakes.tasks import FakeTask, FakeTasks


@dataclass
class FakeCall:
    server: FakeServer
    request: Request
    task: FakeTask | None = None  # the call was taken as this task (tests.fakes.tasks)

    @property
    def arguments(self) -> dict[str, Any]:
        return (self.request.params or {}).get("arguments", {})

    @property
    def progress_token(self) -> Any:
        return (self.request.params or {}).get("_meta", {}).get("progressToken")

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.server.end.send(Notification("notifications/progress", params))

    async def log(self, level: str, data: Any) -> None:
        await self.server.end.send(Notification("notifications/message", {"level": level, "data": data}))


Handler = Callable[[FakeCall], Awaitable[dict[str, Any] | ErrorResponse | None]]


def text_result(text: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


@dataclass
class FakeServer:
    end: MemoryServerEnd
    tools: dict[str, Handler] = field(default_factory=dict)
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)  # a tool's inputSchema ({"type": "object"})
    annotations: dict[str, dict[str, Any]] = field(default_factory=dict)  # a tool's annotations (readOnlyHint ...)
    list_error: ErrorResponse | None = None  # scripted answer to tools/list (its id is replaced)
    protocol_version: str | None = None  # None: echo what the client asked
    capabilities: dict[str, Any] = field(default_factory=lambda: {"tools": {"listChanged": True}})
    page_size: int = 100
    received: list[Message] = field(default_factory=list)
    calls: list[Request] = field(default_factory=list)
    cancelled: list[Any] = field(default_factory=list)
    initialize_handler: Handler | None = None
    deaf: bool = False  # after answering initialize, answers nothing (a server that stopped reading)
    tasks: FakeTasks | None = None  # task support (2025-11-25): its capability is added to ``capabilities``
    _nursery: trio.Nursery | None = field(default=None, init=False, repr=False)

    async def serve(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            while True:
                try:
                    message = await self.end.receive()
                except (trio.EndOfChannel, trio.ClosedResourceError):
                    nursery.cancel_scope.cancel()
                    return
                self.received.append(message)
                if isinstance(message, Request):
                    nursery.start_soon(self._handle, message)
                elif isinstance(message, Notification) and message.method == "notifications/cancelled":
                    self.cancelled.append((message.params or {}).get("requestId"))

    def _tool(self, name: str) -> dict[str, Any]:
        tool: dict[str, Any] = {"name": name, "inputSchema": self.schemas.get(name, {"type": "object"})}
        if name in self.annotations:
            tool["annotations"] = self.annotations[name]
        if self.tasks is not None and name in self.tasks.support:
            tool["execution"] = {"taskSupport": self.tasks.support[name]}
        return tool

    async def _handle(self, request: Request) -> None:
        params = request.params or {}
        reply: dict[str, Any] | ErrorResponse | None
        answer = NotImplemented
        if self.tasks is not None and request.method != "initialize":
            assert self._nursery is not None
            answer = await self.tasks.handle(self, request, self._nursery)
        if self.deaf and request.method != "initialize":
            return
        if answer is not NotImplemented:
            reply = answer
        elif request.method == "initialize":
            if self.initialize_handler is not None:
                reply = await self.initialize_handler(FakeCall(self, request))
            else:
                reply = {
                    "protocolVersion": self.protocol_version or params.get("protocolVersion"),
                    "capabilities": {**self.capabilities, **(self.tasks.capabilities() if self.tasks else {})},
                    "serverInfo": {"name": "fake", "version": "1"},
                    "instructions": "be nice",
                }
        elif request.method == "tools/list" and self.list_error is not None:
            reply = ErrorResponse(request.id, self.list_error.code, self.list_error.message)
        elif request.method == "tools/list":
            names = sorted(self.tools)
            start = int(params.get("cursor") or 0)
            page = names[start : start + self.page_size]
            reply = {"tools": [self._tool(n) for n in page]}
            if start + self.page_size < len(names):
                reply["nextCursor"] = str(start + self.page_size)
        elif request.method == "tools/call":
            self.calls.append(request)
            handler = self.tools.get(params.get("name", ""))
            if handler is None:
                reply = ErrorResponse(request.id, -32602, f"unknown tool {params.get('name')}")
            else:
                reply = await handler(FakeCall(self, request))
        elif request.method == "ping":
            reply = {}
        else:
            reply = ErrorResponse(request.id, -32601, "method not found")
        if reply is None:
            return  # scripted silence
        if isinstance(reply, ErrorResponse):
            await self.end.send(reply)
        else:
            await self.end.send(Response(request.id, reply))
