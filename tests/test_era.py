"""Era negotiation and the 2026-07-28 wire, against the scripted servers of :mod:`tests.fakes.modern_http`
(modern-only, dual-era, 2025-only) and over the in-memory transport (stdio's rules)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
import trio
import trio.testing

from runner.errors import CallTimeout, ConnectFailed, JsonRpcError, OutcomeUnknown
from runner.exitcodes import ExitCode
from runner.protocol.jsonrpc import ErrorResponse, Notification, Request, Response
from runner.session import Session, SessionOptions, open_session
from runner.session.answers import make_policy
from runner.session.era import EraMemory, modern_error
from runner.session.results import TaskNotFollowed
from runner.testing.memory import memory_transport_pair
from runner.transports.http.transport import HttpParams, open_http_transport
from tests.fakes.modern_http import LEGACY, MODERN, ModernServer

URL = "http://mcp.test/mcp"


@asynccontextmanager
async def connected(
    server: ModernServer, options: SessionOptions | None = None
) -> AsyncIterator[tuple[Session, list[str]]]:
    warnings: list[str] = []
    opts = options or SessionOptions(name="m")
    opts = dataclasses.replace(opts, on_warning=warnings.append)
    async with (
        httpx2.AsyncClient(transport=httpx2.MockTransport(server)) as client,
        open_http_transport(HttpParams(URL), client=client) as transport,
        open_session(transport, opts) as session,
    ):
        yield session, warnings


async def test_a_modern_only_server_is_spoken_to_in_2026_07_28() -> None:
    server = ModernServer("modern")
    async with connected(server) as (session, _):
        assert session.era.modern and session.protocol_version == MODERN
        assert session.server_info == {"name": "modern-fake", "version": "1"}
        assert session.instructions == "modern"
        result = await session.call_tool("echo", {"x": 1})
        assert result.content[0].raw["text"] == '{"x": 1}'
    assert [p.method for p in server.posts] == ["server/discover", "tools/list", "tools/call"]
    probe, _listing, call = server.posts
    assert probe.body["id"] == 0  # the probe keeps the ids of later requests what they were
    assert "initialize" not in [p.method for p in server.posts] and server.gets == 0  # no GET, no DELETE
    meta = call.body["params"]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == MODERN
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "mcp-run"
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {}
    assert meta["io.modelcontextprotocol/logLevel"] == "info"  # the level logging/setLevel asks in 2025
    assert meta["progressToken"] == call.body["id"]
    assert call.headers["mcp-protocol-version"] == MODERN
    assert call.headers["mcp-method"] == "tools/call" and call.headers["mcp-name"] == "echo"
    assert "mcp-session-id" not in call.headers


async def test_x_mcp_header_parameters_are_mirrored_and_invalid_tools_dropped() -> None:
    server = ModernServer("modern")
    async with connected(server) as (session, warnings):
        names = [t.name for t in await session.list_tools()]
        assert "bad" not in names and "region" in names
        assert warnings == [
            "m: tool 'bad' left out: its input schema is invalid for 2026-07-28 over HTTP: x-mcp-header 'N' on "
            "'n': the parameter must be a string, integer or boolean, not 'number'"
        ]
        await session.call_tool("region", {"region": "Zürich", "query": "q"})
        await session.call_tool("region", {"query": "no region: no header"})
    first, second = server.of("tools/call")
    assert first.headers["mcp-param-region"] == "=?base64?WsO8cmljaA==?="
    assert "mcp-param-region" not in second.headers


async def test_a_call_before_any_listing_lists_first_to_know_the_markings() -> None:
    server = ModernServer("modern")
    async with connected(server) as (session, _):
        await session.call_tool("region", {"region": "eu"})
    assert [p.method for p in server.posts] == ["server/discover", "tools/list", "tools/call"]
    assert server.posts[-1].headers["mcp-param-region"] == "eu"


async def test_a_dual_era_server_is_spoken_to_in_2026_07_28() -> None:
    server = ModernServer("dual")
    async with connected(server) as (session, _):
        assert session.era.modern
        await session.call_tool("echo", {})
    assert "initialize" not in [p.method for p in server.posts]


async def test_a_2025_server_gets_the_handshake_after_the_probe() -> None:
    server = ModernServer("legacy")
    async with connected(server) as (session, _):
        assert not session.era.modern and session.protocol_version == LEGACY
        result = await session.call_tool("echo", {"a": "b"})
        assert not result.is_error
    methods = [p.method for p in server.posts]
    assert methods[:3] == ["server/discover", "initialize", "notifications/initialized"]
    call = server.of("tools/call")[0]
    assert call.headers["mcp-session-id"] == "s1" and call.headers["mcp-protocol-version"] == LEGACY
    assert "mcp-method" not in call.headers  # the 2025 wire, as it was
    assert call.body["params"]["_meta"] == {"progressToken": call.body["id"]}
    assert call.body["id"] == 2  # initialize is 1, as without a probe


async def test_the_era_is_remembered_for_the_server_no_second_probe() -> None:
    server = ModernServer("legacy")
    memory = EraMemory()
    options = SessionOptions(name="m", era_memory=memory)
    async with connected(server, options):
        pass
    async with connected(server, options):
        pass
    assert memory.version == "legacy"
    assert [p.method for p in server.posts if p.method in ("server/discover", "initialize")] == [
        "server/discover",
        "initialize",
        "initialize",
    ]


async def test_a_modern_server_naming_only_2025_versions_gets_the_handshake() -> None:
    server = ModernServer("dual", supported=(LEGACY,))  # -32022 to the probe, naming 2025-11-25
    async with connected(server) as (session, _):
        assert session.protocol_version == LEGACY


async def test_a_pinned_2026_version_the_server_lacks_names_what_it_supports() -> None:
    server = ModernServer("modern", supported=("2027-01-01",))
    with pytest.raises(ConnectFailed) as info:
        async with connected(server, SessionOptions(name="m", protocol=MODERN)):
            pass  # pragma: no cover
    assert info.value.exit_code == ExitCode.UNREACHABLE
    assert "the server speaks 2027-01-01" in str(info.value)
    assert "-32022" in str(info.value)


async def test_auto_against_a_server_of_only_unknown_modern_versions_fails_clearly() -> None:
    server = ModernServer("modern", supported=("2027-01-01",))
    with pytest.raises(ConnectFailed, match="the server speaks 2027-01-01"):
        async with connected(server):
            pass  # pragma: no cover


async def test_a_pinned_2026_version_against_a_2025_server_fails_clearly() -> None:
    server = ModernServer("legacy")
    with pytest.raises(ConnectFailed) as info:
        async with connected(server, SessionOptions(name="m", protocol=MODERN)):
            pass  # pragma: no cover
    assert str(info.value) == (
        "could not connect: protocol 2026-07-28 was asked for (--protocol-version or the server's 'protocol:'), "
        "but the server does not speak it: server/discover: server error -32000: Bad Request: No valid session "
        "ID provided"
    )
    assert [p.method for p in server.posts] == ["server/discover"]


async def test_a_pinned_2025_version_skips_the_probe() -> None:
    server = ModernServer("dual")
    async with connected(server, SessionOptions(name="m", protocol=LEGACY)) as (session, _):
        assert session.protocol_version == LEGACY
    assert server.posts[0].method == "initialize"


async def test_a_pinned_2025_version_against_a_modern_only_server_fails() -> None:
    server = ModernServer("modern")
    with pytest.raises(ConnectFailed, match="speaks 2026-07-28"):
        async with connected(server, SessionOptions(name="m", protocol=LEGACY)):
            pass  # pragma: no cover


async def test_a_broken_stream_is_lost_at_once_never_resumed(autojump_clock: trio.abc.Clock) -> None:
    server = ModernServer("modern")
    async with connected(server) as (session, _):
        with pytest.raises(OutcomeUnknown, match="2026-07-28 streams cannot be resumed"):
            await session.call_tool("drop", {})
    assert server.gets == 0 and len(server.of("tools/call")) == 1


async def test_cancelling_closes_the_stream_and_sends_no_notification(autojump_clock: trio.abc.Clock) -> None:
    server = ModernServer("modern")
    async with connected(server) as (session, _):
        with pytest.raises(CallTimeout):
            await session.call_tool("slow", {}, timeout=5)
        await trio.testing.wait_all_tasks_blocked()
        assert server.streams[0].closed
    assert [p for p in server.posts if "id" not in p.body] == []  # no notifications/cancelled, no POST at all


async def test_a_task_result_where_tasks_are_not_followed_is_in_doubt() -> None:
    server = ModernServer("modern")
    async with connected(server) as (session, _):
        with pytest.raises(TaskNotFollowed, match=re.escape("ran the call as a task ('t-1')")) as info:
            await session.call_tool("task", {})
    assert info.value.result_type == "task"
    assert isinstance(info.value, OutcomeUnknown) and info.value.exit_code == ExitCode.OUTCOME_UNKNOWN


async def test_input_required_is_answered_by_the_policy_and_sent_again() -> None:
    server = ModernServer("modern")
    async with connected(server, SessionOptions(name="m", answers=make_policy("defaults"))) as (session, _):
        result = await session.call_tool("ask", {})
    answered = json.loads(result.text)
    assert answered == {"responses": {"confirm": {"action": "accept", "content": {"ok": True}}}, "state": "s1"}
    asks = [p.body for p in server.posts if p.body.get("method") == "tools/call"]
    assert len(asks) == 2 and asks[0]["id"] != asks[1]["id"]  # the same call, sent again with a new id


async def test_input_required_declined_by_default_is_still_sent_again() -> None:
    server = ModernServer("modern")
    async with connected(server) as (session, _):
        result = await session.call_tool("ask", {})
    assert json.loads(result.text)["responses"]["confirm"]["action"] == "decline"


async def test_no_ping_in_2026_07_28_discover_instead() -> None:
    server = ModernServer("modern")
    async with connected(server) as (session, _):
        await session.ping()
    assert [p.method for p in server.posts] == ["server/discover", "server/discover"]


def test_modern_error_codes_read_clearly() -> None:
    text = str(modern_error(-32022, "Unsupported protocol version", {"supported": ["2027-01-01"]}, method="x"))
    assert "the server speaks 2027-01-01; pin one of them with --protocol-version" in text
    assert "HeaderMismatch" in str(modern_error(-32020, "Header mismatch", None, method="tools/call"))
    text = str(modern_error(-32021, "missing", {"requiredCapabilities": {"sampling": {}}}, method="tools/call"))
    assert "MissingRequiredClientCapability: it wants {'sampling': {}}" in text


# -- stdio's rules, over the in-memory transport ----------------------------------------------------


async def _serve_modern_stdio(end: Any, seen: list[Any]) -> None:
    """A 2026-07-28 server over a stream transport: answers server/discover and tools/call."""
    while True:
        try:
            message = await end.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return
        seen.append(message)
        if not isinstance(message, Request):
            continue
        if message.method == "server/discover":
            await end.send(Response(message.id, {"supportedVersions": [MODERN], "capabilities": {"tools": {}}}))
        elif message.method == "tools/call" and (message.params or {}).get("name") == "slow":
            pass  # never answers
        elif message.method == "tools/list":
            bad = {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}
            await end.send(Response(message.id, {"tools": [{"name": "bad", "inputSchema": bad}]}))
        else:
            await end.send(ErrorResponse(message.id, -32601, "no"))


async def test_over_stdio_a_modern_server_gets_meta_and_cancellation_notices(autojump_clock: trio.abc.Clock) -> None:
    seen: list[Any] = []
    async with memory_transport_pair("stdio: modern") as (client, end), trio.open_nursery() as nursery:
        nursery.start_soon(_serve_modern_stdio, end, seen)
        async with open_session(client, SessionOptions(name="m", server_log_level=None)) as session:
            assert session.era.modern
            # x-mcp-header markings matter only over HTTP: the tool is kept over stdio
            assert [t.name for t in await session.list_tools()] == ["bad"]
            with pytest.raises(CallTimeout):
                await session.call_tool("slow", {}, timeout=3)
            await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    call = next(m for m in seen if isinstance(m, Request) and m.method == "tools/call")
    assert call.params is not None and call.params["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN
    assert call.headers is None
    cancelled = [m for m in seen if isinstance(m, Notification)]
    assert [n.method for n in cancelled] == ["notifications/cancelled"]  # and no notifications/initialized


async def test_over_stdio_a_silent_probe_falls_back_to_the_handshake(autojump_clock: trio.abc.Clock) -> None:
    async def serve(end: Any) -> None:
        while True:
            message = await end.receive()
            if isinstance(message, Request) and message.method == "initialize":
                result = {"protocolVersion": LEGACY, "capabilities": {"tools": {}}}
                await end.send(Response(message.id, result))

    async with memory_transport_pair("stdio: old") as (client, end), trio.open_nursery() as nursery:
        nursery.start_soon(serve, end)
        start = trio.current_time()
        async with open_session(client, SessionOptions(name="m", server_log_level=None)) as session:
            assert session.protocol_version == LEGACY
            assert trio.current_time() - start == 10  # the probe's bound
        nursery.cancel_scope.cancel()


async def test_a_jsonrpc_error_to_a_modern_call_reads_clearly() -> None:
    server = ModernServer("modern")
    async with connected(server) as (session, _):
        with pytest.raises(JsonRpcError, match="-32601"):
            await session.request("resources/read", {"uri": "file:///x"})
    assert server.posts[-1].headers["mcp-name"] == "file:///x"


def test_the_protocol_type_and_the_choices_agree() -> None:
    from typing import get_args

    from runner.protocol.versions import PROTOCOL_CHOICES, ProtocolChoice

    assert get_args(ProtocolChoice) == PROTOCOL_CHOICES


async def test_an_unknown_result_type_is_a_malformed_result() -> None:
    from runner.errors import MalformedMessage
    from runner.session.results import complete_result

    with pytest.raises(MalformedMessage, match="m: tools/call result has resultType 'later'"):
        complete_result("tools/call", {"resultType": "later"}, server="m")
    assert complete_result("tools/call", {"content": []}, server="m") == {"content": []}
