"""A scripted MCP server for ``httpx2.MockTransport`` that speaks 2026-07-28, 2025-11-25, or both.

``era`` is ``"modern"`` (2026-07-28 only: ``initialize`` gets 400 -32601 naming its versions), ``"dual"``
(either, chosen per request the way the revision says: a request with the modern ``_meta`` is served
statelessly, ``initialize`` opens a 2025 session) or ``"legacy"`` (2025-11-25 only: a request without a session
gets the TypeScript SDK's 400 -32000 "No valid session ID provided", ``server/discover`` included).

In the modern era it checks every POST as a 2026-07-28 server must (``MCP-Protocol-Version`` equal to the
``_meta`` version, ``Mcp-Method``, ``Mcp-Name`` decoded equal to the body, one ``Mcp-Param-*`` per marked
parameter present in the arguments) and answers 400 -32020 on a mismatch. It records what it saw.

Tools: ``echo`` (text of its arguments), ``region`` (its ``region`` parameter is marked ``x-mcp-header``),
``bad`` (an invalid marking: a ``number``), ``drop`` (an SSE stream cut before the response), ``slow`` (an
SSE stream that never answers), ``task`` and ``ask`` (answer ``resultType`` task / input_required).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import trio

from runner.protocol.headers import decode_header_value

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

TOOLS: list[dict[str, Any]] = [
    {"name": "echo", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {
        "name": "region",
        "inputSchema": {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}, "query": {"type": "string"}},
        },
    },
    {
        "name": "bad",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}},
    },
    {"name": "drop", "inputSchema": {"type": "object"}},
    {"name": "slow", "inputSchema": {"type": "object"}},
    {"name": "task", "inputSchema": {"type": "object"}},
    {"name": "ask", "inputSchema": {"type": "object"}},
]
MARKS = {"region": {"region": "Region"}}
_CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean", "default": True}}, "required": ["ok"]}


class _Cut(httpx2.AsyncByteStream):
    """An SSE body: ``chunks``, then a cut connection (``hang``: wait forever instead). Records its close."""

    def __init__(self, *chunks: bytes, hang: bool = False) -> None:
        self.chunks = chunks
        self.hang = hang
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.hang:
            await trio.sleep_forever()
        raise httpx2.ReadError("connection cut")

    async def aclose(self) -> None:
        self.closed = True


@dataclass
class Post:
    headers: httpx2.Headers
    body: dict[str, Any]

    @property
    def method(self) -> str:
        return str(self.body.get("method"))


@dataclass
class ModernServer:
    era: str = "modern"
    supported: tuple[str, ...] = ()
    posts: list[Post] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    gets: int = 0
    streams: list[_Cut] = field(default_factory=list)
    tasks: bool = False  # its server/discover offers the tasks extension

    def __post_init__(self) -> None:
        if not self.supported:
            self.supported = {"modern": (MODERN,), "dual": (MODERN, LEGACY), "legacy": (LEGACY,)}[self.era]

    def of(self, method: str) -> list[Post]:
        return [p for p in self.posts if p.method == method]

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST":
            self.gets += 1
            return httpx2.Response(405)
        raw = await request.aread()
        body = json.loads(raw)
        self.posts.append(Post(request.headers, body))
        rid = body.get("id")
        if rid is None:
            return httpx2.Response(202)
        params = body.get("params") or {}
        meta = params.get("_meta") or {}
        if self.era != "legacy" and META_VERSION in meta:
            return self._modern(rid, body["method"], params, meta[META_VERSION], request.headers)
        if body["method"] == "initialize" and self.era != "modern":
            result = {"protocolVersion": LEGACY, "capabilities": {"tools": {}}, "serverInfo": {"name": "dual"}}
            return httpx2.Response(
                200, json={"jsonrpc": "2.0", "id": rid, "result": result}, headers={"mcp-session-id": "s1"}
            )
        if self.era == "modern":
            message = f"unknown method {body['method']}; this server speaks {', '.join(self.supported)}"
            return _error(404 if body["method"] == "initialize" else 400, rid, -32601, message)
        if request.headers.get("mcp-session-id") != "s1":
            return _error(400, None, -32000, "Bad Request: No valid session ID provided")
        return self._answer(rid, body["method"], params)

    def _modern(
        self, rid: Any, method: str, params: dict[str, Any], version: str, headers: httpx2.Headers
    ) -> httpx2.Response:
        if version not in self.supported:
            data = {"supported": list(self.supported), "requested": version}
            return _error(400, rid, -32022, "Unsupported protocol version", data)
        mismatch = _check_headers(method, params, version, headers)
        if mismatch is not None:
            return _error(400, rid, -32020, f"Header mismatch: {mismatch}")
        if method == "server/discover":
            result = {
                "supportedVersions": list(self.supported),
                "capabilities": {"tools": {}, **({"extensions": {TASKS_EXTENSION: {}}} if self.tasks else {})},
                "instructions": "modern",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern-fake", "version": "1"}},
            }
            return httpx2.Response(200, json={"jsonrpc": "2.0", "id": rid, "result": result})
        if method in ("ping", "logging/setLevel"):
            return _error(404, rid, -32601, f"{method} does not exist in 2026-07-28")
        return self._answer(rid, method, params)

    def _answer(self, rid: Any, method: str, params: dict[str, Any]) -> httpx2.Response:
        if method == "tools/list":
            return _result(rid, {"tools": TOOLS})
        if method != "tools/call":
            return _error(404, rid, -32601, f"no method {method}")
        self.calls.append(params)
        name = params.get("name")
        priming = b"id: 1\nretry: 10\ndata: \n\n"
        if name in ("drop", "slow"):
            stream = _Cut(priming, hang=name == "slow")
            self.streams.append(stream)
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)
        if name == "task":
            return _result(rid, {"resultType": "task", "task": {"taskId": "t-1", "status": "working"}})
        if name == "ask" and "inputResponses" not in params:
            confirm = {"method": "elicitation/create", "params": {"message": "Sure?", "requestedSchema": _CONFIRM}}
            return _result(
                rid, {"resultType": "input_required", "inputRequests": {"confirm": confirm}, "requestState": "s1"}
            )
        if name == "ask":  # the answers, sent again with the request state
            answered = {"responses": params["inputResponses"], "state": params.get("requestState")}
            return _result(rid, {"content": [{"type": "text", "text": json.dumps(answered)}], "isError": False})
        text = json.dumps(params.get("arguments"), sort_keys=True)
        return _result(rid, {"content": [{"type": "text", "text": text}], "isError": False})


def _check_headers(method: str, params: dict[str, Any], version: str, headers: httpx2.Headers) -> str | None:
    if headers.get("mcp-protocol-version") != version:
        return f"MCP-Protocol-Version {headers.get('mcp-protocol-version')!r} is not {version!r}"
    if headers.get("mcp-method") != method:
        return f"Mcp-Method {headers.get('mcp-method')!r} is not {method!r}"
    key = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}.get(method)
    if key is not None:
        sent = headers.get("mcp-name")
        if sent is None or decode_header_value(sent) != params.get(key):
            return f"Mcp-Name {sent!r} does not match {params.get(key)!r}"
    if method == "tools/call":
        arguments = params.get("arguments") or {}
        for parameter, header in MARKS.get(str(params.get("name")), {}).items():
            value = arguments.get(parameter)
            sent = headers.get(f"mcp-param-{header}")
            if value is not None and (sent is None or decode_header_value(sent) != value):
                return f"Mcp-Param-{header} {sent!r} does not match {value!r}"
    return None


def _result(rid: Any, result: dict[str, Any]) -> httpx2.Response:
    return httpx2.Response(200, json={"jsonrpc": "2.0", "id": rid, "result": result})


def _error(status: int, rid: Any, code: int, message: str, data: Any = None) -> httpx2.Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return httpx2.Response(status, json={"jsonrpc": "2.0", "id": rid, "error": error})
