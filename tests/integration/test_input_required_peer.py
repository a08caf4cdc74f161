"""The 2026-07-28 ``input_required`` loop (:func:`runner.session.resolve_input_required`) against the
official SDK's stateless handler, and the same questions in the 2025 era, where the SDK asks them mid-call.

The 2026 wire here is the least a request needs (``_meta``, the ``MCP-Protocol-Version``, ``Mcp-Method`` and
``Mcp-Name`` headers), written in the test: mcp-run's own 2026 wire is built elsewhere and plugs into the
same ``send``. The tool ``resolved`` (tests/peers/sdk_asking_server.py) asks for a form and the roots
through the SDK's resolvers: one ``input_required`` result holding both, then a complete result once the
client sends the answers and the ``requestState`` back."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
import trio

from runner._trio import single_error
from runner.connect import HttpTarget, open_target
from runner.errors import ProtocolError
from runner.protocol.jsonrpc import ErrorResponse, Response, decode
from runner.protocol.sse import SSEParser
from runner.session import AnswerPolicy, ElicitationPolicy, Root, SessionOptions, resolve_input_required
from runner.session.answers import Answer
from runner.session.input_required import SendRequest
from tests.integration.test_legacy_sse_peer import asking_server

pytestmark = pytest.mark.integration

MODERN = "2026-07-28"


def modern_send(client: httpx2.AsyncClient, url: str, policy: AnswerPolicy, seen: list[dict[str, Any]]) -> SendRequest:
    ids = iter(range(1, 1000))

    async def send(params: dict[str, Any]) -> dict[str, Any]:
        rid = next(ids)
        seen.append(params)
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": policy.client_capabilities(),
            "io.modelcontextprotocol/clientInfo": {"name": "mcp-run-test", "version": "1"},
        }
        body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {**params, "_meta": meta}}
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call",
            "Mcp-Name": params["name"],
        }
        response = await client.post(
            url, content=json.dumps(body), headers={**headers, "Content-Type": "application/json"}
        )
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            messages = [m for e in SSEParser().feed(response.content + b"\n\n") if e.data for m in decode(e.data)]
        else:
            messages = decode(response.content)
        for message in messages:
            if isinstance(message, Response) and message.id == rid:
                return message.result
            if isinstance(message, ErrorResponse):
                raise ProtocolError(f"{message.code} {message.message}")
        raise AssertionError(f"no response to {rid}: {response.status_code} {response.text[:300]}")

    return send


async def test_input_required_is_answered_by_policy_against_the_sdk() -> None:
    policy = AnswerPolicy(ElicitationPolicy.DEFAULTS, (Root("file:///data", "data"),))
    seen: list[dict[str, Any]] = []
    answers: list[Answer] = []
    with trio.fail_after(60):
        async with asking_server("http") as server, httpx2.AsyncClient() as client:
            send = modern_send(client, server.url, policy, seen)
            result = await resolve_input_required(
                send, {"name": "resolved", "arguments": {}}, policy, on_answer=answers.append
            )
    assert result["resultType"] == "complete"
    assert (
        result["content"][0]["text"]
        == "accept {'name': 'John Doe', 'count': 3, 'ratio': 0.5, 'ok': True} | file:///data"
    )
    first, second = seen
    assert "inputResponses" not in first
    assert isinstance(second["requestState"], str) and second["requestState"]
    assert sorted(a.method for a in answers) == ["elicitation/create", "roots/list"]


async def test_without_the_capability_the_sdk_refuses_instead_of_asking() -> None:
    # The default policy declares no elicitation: a 2026 server that needs it answers -32021, never asks.
    policy = AnswerPolicy()
    with trio.fail_after(60):
        async with asking_server("http") as server, httpx2.AsyncClient() as client:
            send = modern_send(client, server.url, policy, [])
            with pytest.raises(ProtocolError, match="-32021 Client did not declare the form elicitation capability"):
                await resolve_input_required(send, {"name": "resolved", "arguments": {}}, policy)


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_the_same_questions_mid_call_in_the_2025_era(transport: str) -> None:
    policy = AnswerPolicy(ElicitationPolicy.DEFAULTS, (Root("file:///data", "data"),))
    with trio.fail_after(60):
        async with asking_server(transport) as server:
            with single_error():
                options = SessionOptions(name="asks", answers=policy)
                async with open_target(HttpTarget(url=server.url, transport="auto"), options) as session:
                    result = await session.call_tool("resolved", {})
    assert result.text == "accept {'name': 'John Doe', 'count': 3, 'ratio': 0.5, 'ok': True} | file:///data"
