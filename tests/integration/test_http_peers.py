"""mcp-run's session over Streamable HTTP against real servers written by others: the official SDK's
server (SSE and JSON responses, resumption after the server closes a stream on purpose) and the
reference server-everything (including a stream cut by a proxy, where its resumption is known to be
broken). Real sockets on 127.0.0.1, so the real clock, each test bounded by ``trio.fail_after``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from runner._trio import single_error
from runner.connect import HttpTarget, open_target
from runner.errors import JsonRpcError, OutcomeUnknown
from runner.protocol.jsonrpc import RequestId
from runner.protocol.mcp import LogMessage, Progress
from runner.session import Session, SessionOptions, open_session
from runner.transports.http.transport import HttpParams, open_http_transport
from tests.integration.peers import everything_http_server, sdk_http_server

pytestmark = pytest.mark.integration

MODES = {"sse": (), "json": ("--json-response",)}


@asynccontextmanager
async def http_session(url: str, **options: Any) -> AsyncIterator[Session]:
    target = HttpTarget(url=url, max_concurrency=options.pop("max_concurrency", 8))
    with single_error():
        async with open_target(target, SessionOptions(name="http", **options)) as session:
            yield session


# -- the official SDK server --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_sdk_http_lists_tools(mode: str) -> None:
    with trio.fail_after(60):
        async with sdk_http_server(*MODES[mode]) as server, http_session(server.url) as session:
            tools = {t.name: t for t in await session.list_tools()}
            result = await session.call_tool("add", {"a": 2, "b": 40})
    assert {"echo", "add", "slow", "fail", "structured", "count", "close_stream", "big"} <= set(tools)
    assert tools["echo"].annotations.read_only is True
    assert session.server_info.get("name") == "mcp-run-sdk-peer"
    assert result.text == "42" and not result.is_error


@pytest.mark.parametrize("mode", MODES)
async def test_sdk_http_fifty_calls_in_flight_on_one_session(mode: str) -> None:
    results: dict[int, str] = {}
    with trio.fail_after(60):
        async with sdk_http_server(*MODES[mode]) as server, http_session(server.url, max_concurrency=50) as session:

            async def one(i: int) -> None:
                result = await session.call_tool("echo", {"text": f"message {i}"})
                assert not result.is_error
                results[i] = result.text

            async with trio.open_nursery() as nursery:
                for i in range(50):
                    nursery.start_soon(one, i)
    assert results == {i: f"message {i}" for i in range(50)}


async def test_sdk_http_progress_and_logs_attributed_to_their_call() -> None:
    """Fifty concurrent calls, each with its own step count: every progress notification reaches its own
    call's handler, and every log message arrives tagged with the id of the request it belongs to."""
    calls = 50
    progress: dict[int, list[Progress]] = {i: [] for i in range(calls)}
    request_ids: dict[int, RequestId] = {}
    logs: list[tuple[LogMessage, RequestId | None]] = []
    with trio.fail_after(60):
        async with (
            sdk_http_server() as server,
            http_session(server.url, max_concurrency=calls, on_log=lambda m, rid: logs.append((m, rid))) as session,
        ):

            async def one(i: int) -> None:
                async def record(rid: RequestId, _token: RequestId) -> None:
                    request_ids[i] = rid

                steps = 1 + i % 4
                result = await session.call_tool(
                    "slow",
                    {"steps": steps, "delay": 0.01},
                    on_progress=progress[i].append,
                    before_send=record,
                )
                assert result.text == f"done {steps}"

            async with trio.open_nursery() as nursery:
                for i in range(calls):
                    nursery.start_soon(one, i)
    for i in range(calls):
        steps = 1 + i % 4
        assert [(p.progress, p.total) for p in progress[i]] == [(s, steps) for s in range(1, steps + 1)]
    by_request: dict[RequestId | None, list[str]] = {}
    for message, rid in logs:
        by_request.setdefault(rid, []).append(str(message.data))
    assert None not in by_request  # every log came on a request's POST stream
    for i in range(calls):
        steps = 1 + i % 4
        assert by_request[request_ids[i]] == [f"slow step {s}" for s in range(1, steps + 1)]


@pytest.mark.parametrize("mode", MODES)
async def test_sdk_http_tool_error_and_protocol_error(mode: str) -> None:
    with trio.fail_after(60):
        async with sdk_http_server(*MODES[mode]) as server, http_session(server.url) as session:
            result = await session.call_tool("fail", {"message": "deliberate"})
            assert result.is_error and "deliberate" in result.text
            with pytest.raises(JsonRpcError) as info:
                await session.request("no/such/method", {})
            # The session is still usable after both.
            assert (await session.call_tool("echo", {"text": "still here"})).text == "still here"
    assert info.value.code == -32601


@pytest.mark.parametrize("mode", MODES)
async def test_sdk_http_structured_and_large_results(mode: str) -> None:
    with trio.fail_after(60):
        async with sdk_http_server(*MODES[mode]) as server, http_session(server.url) as session:
            structured = await session.call_tool("structured", {})
            big = await session.call_tool("big", {"n": 1_000_000})
    assert structured.structured_content == {"name": "mcp-run", "items": [1, 2, 3], "nested": {"ok": True}}
    assert len(big.text) == 1_000_000


@dataclass
class _Requests:
    """What the client sent, seen from an httpx event hook."""

    methods: list[str] = field(default_factory=list)
    resumes: list[str] = field(default_factory=list)  # Last-Event-ID of each GET that carried one

    async def hook(self, request: httpx2.Request) -> None:
        self.methods.append(request.method)
        last = request.headers.get("last-event-id")
        if request.method == "GET" and last is not None:
            self.resumes.append(last)


async def test_sdk_http_stream_closed_by_server_is_resumed_not_reposted(tmp_path: Path) -> None:
    """``close_stream`` closes its SSE stream half-way (SEP-1699) and keeps reporting progress: the client
    waits the server's retry interval, GETs with Last-Event-ID, and gets the rest and the result. The tool
    ran once, and every progress notification arrived exactly once."""
    count_file = tmp_path / "calls.txt"
    seen: list[Progress] = []
    requests = _Requests()
    extra = ("--resumable", "--retry-interval", "100", "--count-file", str(count_file))
    with trio.fail_after(60):
        async with sdk_http_server(*extra) as server:
            client = httpx2.AsyncClient(event_hooks={"request": [requests.hook]})
            with single_error():
                async with (
                    client,
                    open_http_transport(HttpParams(url=server.url), client=client) as transport,
                    # resumption is the 2025 wire's (2026-07-28 has none): pinned to it
                    open_session(transport, SessionOptions(name="sdk", protocol="2025-11-25")) as session,
                ):
                    result = await session.call_tool(
                        "close_stream", {"steps": 6, "delay": 0.05}, on_progress=seen.append, timeout=30
                    )
    assert result.text == "closed-and-finished" and not result.is_error
    assert [p.progress for p in seen] == [1, 2, 3, 4, 5, 6]
    assert count_file.read_text().splitlines() == ["close_stream"]
    assert requests.methods.count("POST") == 3  # initialize, notifications/initialized, tools/call
    assert len(requests.resumes) >= 1  # it resumed by GET with Last-Event-ID


async def test_sdk_http_reconnect_waits_the_retry_interval(tmp_path: Path) -> None:
    """The server asks for ``retry: 400``: the resumption GET comes no sooner than that after the stream
    closed (which is after the first progress notification arrived), and not much later either."""
    requests = _Requests()
    times: dict[str, float] = {}

    async def hook(request: httpx2.Request) -> None:
        await requests.hook(request)
        if request.method == "GET" and "last-event-id" in request.headers:
            times.setdefault("resume", trio.current_time())

    def on_progress(p: Progress) -> None:
        times.setdefault("first progress", trio.current_time())

    with trio.fail_after(60):
        async with sdk_http_server("--resumable", "--retry-interval", "400") as server:
            client = httpx2.AsyncClient(event_hooks={"request": [hook]})
            with single_error():
                async with (
                    client,
                    open_http_transport(HttpParams(url=server.url), client=client) as transport,
                    open_session(transport, SessionOptions(name="sdk", protocol="2025-11-25")) as session,
                ):
                    result = await session.call_tool(
                        "close_stream", {"steps": 4, "delay": 0.01}, on_progress=on_progress
                    )
    assert result.text == "closed-and-finished"
    assert 0.4 <= times["resume"] - times["first progress"] < 2.0


# -- server-everything --------------------------------------------------------------------------------


async def test_everything_http_echo_structured_and_progress() -> None:
    seen: list[Progress] = []
    with trio.fail_after(60):
        async with everything_http_server() as server, http_session(server.url) as session:
            names = {t.name for t in await session.list_tools()}
            assert {"echo", "get-structured-content", "trigger-long-running-operation"} <= names
            echo = await session.call_tool("echo", {"message": "hello over http"})
            weather = await session.call_tool("get-structured-content", {"location": "New York"})
            long = await session.call_tool(
                "trigger-long-running-operation", {"duration": 1, "steps": 4}, on_progress=seen.append
            )
    assert "hello over http" in echo.text
    assert weather.structured_content is not None and "temperature" in weather.structured_content
    assert not long.is_error and "Steps: 4" in long.text
    assert [(p.progress, p.total) for p in seen] == [(1, 4), (2, 4), (3, 4), (4, 4)]


class CuttingProxy:
    """A loopback TCP proxy that forwards bytes both ways, counts the POSTs of ``tools/call``, and cuts
    the client's connection carrying the first ``tools/call`` once its response has passed on
    ``cut_after_progress`` progress notifications. Later connections (the resumption GETs) are left whole."""

    def __init__(self, upstream_port: int, cut_after_progress: int) -> None:
        self.upstream_port = upstream_port
        self.cut_after = cut_after_progress
        self.tools_call_posts = 0
        self.cuts = 0
        self.port = 0

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, client: trio.SocketStream) -> None:
        upstream = await trio.open_tcp_stream("127.0.0.1", self.upstream_port)
        armed = trio.Event()  # this connection carries the tools/call to be cut
        async with client, upstream, trio.open_nursery() as nursery:

            async def up() -> None:
                calls = _Counter(b'"method":"tools/call"')  # only a POST has a body
                async for chunk in client:
                    if new := calls.feed(chunk):
                        self.tools_call_posts += new
                        if self.cuts == 0:
                            armed.set()
                    await upstream.send_all(chunk)
                nursery.cancel_scope.cancel()

            async def down() -> None:
                progress = _Counter(b"notifications/progress")
                async for chunk in upstream:
                    await client.send_all(chunk)
                    if armed.is_set() and self.cuts == 0 and progress.feed(chunk) and progress.total >= self.cut_after:
                        self.cuts += 1
                        break
                nursery.cancel_scope.cancel()

            nursery.start_soon(up)
            nursery.start_soon(down)


class _Counter:
    """Counts the occurrences of ``needle`` in a byte stream fed in arbitrary chunks."""

    def __init__(self, needle: bytes) -> None:
        self.needle = needle
        self.total = 0
        self._tail = b""

    def feed(self, chunk: bytes) -> int:
        """The occurrences completed by ``chunk``."""
        data = self._tail + chunk
        new = data.count(self.needle) - self._tail.count(self.needle)
        self._tail = data[-(len(self.needle) - 1) :]
        self.total += new
        return new


def _port(url: str) -> int:
    port = httpx2.URL(url).port
    assert port is not None
    return port


@pytest.mark.slow
async def test_everything_http_cut_stream_never_reposts_and_never_hangs() -> None:
    """The POST stream of a long call is cut after two progress notifications. server-everything's
    resumption is known to be defective (tests/../docs/peers.md): the call must end with its result or as
    ``OutcomeUnknown`` (a ``CallTimeout`` is one) within its bounds, and the call is never POSTed again."""
    seen: list[Progress] = []
    outcome: str
    with trio.fail_after(60):
        async with everything_http_server() as server, trio.open_nursery() as nursery:
            proxy = CuttingProxy(_port(server.url), cut_after_progress=2)
            await nursery.start(proxy.serve)
            url = f"http://127.0.0.1:{proxy.port}/mcp"
            async with http_session(url) as session:
                try:
                    result = await session.call_tool(
                        "trigger-long-running-operation",
                        {"duration": 2, "steps": 8},
                        on_progress=seen.append,
                        timeout=20,
                        idle_timeout=5,
                    )
                except OutcomeUnknown as exc:
                    outcome = f"unknown: {exc}"
                else:
                    outcome = "result"
                    assert not result.is_error and "Steps: 8" in result.text
            nursery.cancel_scope.cancel()
    assert proxy.cuts == 1
    assert proxy.tools_call_posts == 1, outcome
    progress = [p.progress for p in seen]
    assert progress == sorted(set(progress))  # never a duplicate, never out of order
    if outcome == "result":
        assert progress == [1, 2, 3, 4, 5, 6, 7, 8]
