"""The 2024-11-05 HTTP+SSE transport against a scripted legacy server on ``httpx2.MockTransport``: no
sockets, trio's virtual clock for every wait."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
import trio
import trio.testing

from runner.errors import ConnectFailed, HTTPStatusError, NotDelivered, OutcomeUnknown, TransportError
from runner.protocol.jsonrpc import Notification, Request, Response
from runner.session import AnswerPolicy, ElicitationPolicy, SessionOptions, open_session
from runner.transports.http.legacy_sse import LegacySseTransport, open_legacy_sse_transport, speaks_legacy_sse
from runner.transports.http.params import HttpParams

URL = "http://legacy.test/sse?token=secret"


def event(name: str, data: str) -> bytes:
    return f"event: {name}\ndata: {data}\n\n".encode()


class LiveStream(httpx2.AsyncByteStream):
    """An event stream fed by the test through a channel; a ``BaseException`` sent in cuts it, ``None`` ends it."""

    def __init__(self, first: bytes) -> None:
        self.first = first
        self.send, self.recv = trio.open_memory_channel[bytes | BaseException | None](math.inf)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.first:
            yield self.first
        while True:
            item = await self.recv.receive()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    async def aclose(self) -> None:
        pass


class LegacyServer:
    """GET: an event stream that starts with ``endpoint``; POST to the endpoint: 202, and the answer (a tool
    result echoing the request, or what ``answer`` says) on the stream. ``post_status`` refuses POSTs."""

    def __init__(self, endpoint: str = "/messages/?session_id=abc", *, silent: bool = False) -> None:
        self.endpoint = endpoint
        self.silent = silent
        self.stream: LiveStream | None = None
        self.posts: list[tuple[str, dict[str, Any], httpx2.Headers]] = []
        self.get_status = 200
        self.post_status = 202
        self.post_error: Exception | None = None
        self.answer_requests = True

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET":
            if self.get_status != 200:
                return httpx2.Response(self.get_status, text="no such thing")
            first = b"" if self.silent else event("endpoint", self.endpoint)
            self.stream = LiveStream(first)
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=self.stream)
        body = json.loads(await request.aread())
        self.posts.append((str(request.url), body, request.headers))
        if self.post_error is not None:
            raise self.post_error
        if self.post_status != 202:
            return httpx2.Response(self.post_status, text="refused")
        if "method" in body and "id" in body and self.answer_requests:
            await self.push(self.reply(body))
        return httpx2.Response(202, text="Accepted")

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        if body["method"] == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": "2024-11-05",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "legacy", "version": "1"},
            }
        else:
            result = {"content": [{"type": "text", "text": json.dumps(body.get("params"))}]}
        return {"jsonrpc": "2.0", "id": body["id"], "result": result}

    async def push(self, message: dict[str, Any] | bytes | BaseException | None) -> None:
        assert self.stream is not None
        if isinstance(message, dict):
            message = event("message", json.dumps(message))
        await self.stream.send.send(message)


def params(**overrides: Any) -> HttpParams:
    base: dict[str, Any] = {"url": URL, "headers": {"Authorization": "Bearer t"}, "connect_timeout": 5.0}
    base.update(overrides)
    return HttpParams(**base)


@asynccontextmanager
async def legacy(server: LegacyServer, **overrides: Any) -> AsyncIterator[LegacySseTransport]:
    async with (
        httpx2.AsyncClient(transport=httpx2.MockTransport(server)) as client,
        open_legacy_sse_transport(params(**overrides), client=client) as transport,
    ):
        yield transport


async def test_messages_go_to_the_endpoint_and_answers_come_on_the_stream(autojump_clock: trio.abc.Clock) -> None:
    server = LegacyServer()
    async with legacy(server) as transport:
        assert transport.endpoint == "http://legacy.test/messages/?session_id=abc"
        assert transport.describe() == "http://legacy.test/sse"  # no query: it may hold a secret
        await transport.send(Request(1, "initialize", {}))
        reply = await transport.receive()
        assert isinstance(reply, Response) and reply.id == 1
        url, body, headers = server.posts[0]
        assert url == "http://legacy.test/messages/?session_id=abc"
        assert body["method"] == "initialize"
        assert headers["authorization"] == "Bearer t" and headers["content-type"] == "application/json"
        await server.push(b": keep-alive\n\n")
        await server.push(event("ping-ish", "ignored"))
        await server.push({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}})
        note = await transport.receive()
        assert isinstance(note, Notification) and note.method == "notifications/message"


async def test_a_whole_session_over_the_legacy_transport(autojump_clock: trio.abc.Clock) -> None:
    server = LegacyServer()
    async with legacy(server) as transport, open_session(transport, SessionOptions(name="old")) as session:
        assert session.protocol_version == "2024-11-05"
        result = await session.call_tool("echo", {"text": "hi"})
        assert json.loads(result.text)["arguments"] == {"text": "hi"}


async def test_the_servers_own_requests_are_answered_by_post(autojump_clock: trio.abc.Clock) -> None:
    server = LegacyServer()
    policy = AnswerPolicy(elicitation=ElicitationPolicy.DEFAULTS)
    options = SessionOptions(name="old", answers=policy)
    async with legacy(server) as transport, open_session(transport, options) as session:
        schema = {"type": "object", "properties": {"n": {"type": "integer", "default": 4}}, "required": ["n"]}
        await server.push(
            {
                "jsonrpc": "2.0",
                "id": "s1",
                "method": "elicitation/create",
                "params": {"message": "n?", "requestedSchema": schema},
            }
        )
        await trio.testing.wait_all_tasks_blocked()
        answers = [body for _, body, _ in server.posts if body.get("id") == "s1"]
        assert answers == [{"jsonrpc": "2.0", "id": "s1", "result": {"action": "accept", "content": {"n": 4}}}]
        assert session.broken is None


async def test_an_endpoint_on_another_origin_is_refused(autojump_clock: trio.abc.Clock) -> None:
    for endpoint in ("http://evil.test/messages/", "https://legacy.test/messages/", "//legacy.test:81/m"):
        with pytest.raises(ConnectFailed, match="another origin"):
            async with legacy(LegacyServer(endpoint)):
                pytest.fail("must not open")


async def test_a_refused_get_is_not_a_legacy_endpoint(autojump_clock: trio.abc.Clock) -> None:
    server = LegacyServer()
    server.get_status = 404
    with pytest.raises(ConnectFailed, match=r"server answered 404 Not Found: no such thing: not a 2024-11-05"):
        async with legacy(server):
            pytest.fail("must not open")


async def test_no_endpoint_event_in_time(autojump_clock: trio.abc.Clock) -> None:
    with pytest.raises(ConnectFailed, match="no endpoint event within 5 s"):
        async with legacy(LegacyServer(silent=True)):
            pytest.fail("must not open")
    assert trio.current_time() == pytest.approx(5.0)


async def test_a_dropped_stream_puts_calls_in_flight_in_doubt(autojump_clock: trio.abc.Clock) -> None:
    server = LegacyServer()
    async with legacy(server) as transport, open_session(transport, SessionOptions(name="old")) as session:
        server.answer_requests = False
        outcome: list[BaseException] = []

        async def call() -> None:
            try:
                await session.call_tool("write", {})
            except TransportError as exc:
                outcome.append(exc)

        with trio.fail_after(60):  # a lost stream must end the call, never leave it hanging
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                await trio.testing.wait_all_tasks_blocked()
                await server.push(httpx2.ReadError("connection reset"))
        (error,) = outcome
        assert isinstance(error, OutcomeUnknown)
        assert "2024-11-05 HTTP+SSE event stream broke" in str(error)
        with pytest.raises(NotDelivered, match="the event stream is gone"):
            await transport.send(Request(99, "tools/call", {}))
        assert len([b for _, b, _ in server.posts if b.get("id") == 99]) == 0


async def test_the_end_of_the_stream_is_final(autojump_clock: trio.abc.Clock) -> None:
    server = LegacyServer()
    async with legacy(server) as transport:
        await server.push({"jsonrpc": "2.0", "method": "notifications/x"})
        await server.push(None)
        assert isinstance(await transport.receive(), Notification)  # what was read is delivered first
        for _ in range(2):
            with pytest.raises(TransportError, match="the server closed the 2024-11-05 HTTP\\+SSE event stream"):
                await transport.receive()


@pytest.mark.parametrize(
    ("status", "error", "message"),
    [
        (500, OutcomeUnknown, "may have run"),
        (400, HTTPStatusError, "server answered 400 Bad Request: refused"),
        (404, HTTPStatusError, "server answered 404"),
    ],
)
async def test_a_refused_post(
    autojump_clock: trio.abc.Clock, status: int, error: type[Exception], message: str
) -> None:
    server = LegacyServer()
    async with legacy(server) as transport:
        server.post_status = status
        with pytest.raises(error, match=message) as caught:
            await transport.send(Request(5, "tools/call", {}))
        assert "session_id" not in str(caught.value)  # the endpoint's query is never shown


@pytest.mark.parametrize(
    ("exc", "error"),
    [(httpx2.ConnectError("refused"), NotDelivered), (httpx2.ReadError("cut"), OutcomeUnknown)],
)
async def test_a_post_that_failed(autojump_clock: trio.abc.Clock, exc: Exception, error: type[Exception]) -> None:
    server = LegacyServer()
    async with legacy(server) as transport:
        server.post_error = exc
        with pytest.raises(error):
            await transport.send(Request(5, "tools/call", {}))


def test_what_makes_a_server_legacy() -> None:
    def refused(status: int, *, rpc: bool = False) -> ConnectFailed:
        cause = HTTPStatusError(f"POST: {status}", status_code=status)
        cause.rpc_error = (-32602, "Invalid params", None) if rpc else None
        error = ConnectFailed("could not initialize")
        error.__cause__ = cause
        return error

    assert speaks_legacy_sse(refused(405)) and speaks_legacy_sse(refused(404)) and speaks_legacy_sse(refused(400))
    assert not speaks_legacy_sse(refused(400, rpc=True))  # a modern server's JSON-RPC error
    assert not speaks_legacy_sse(refused(401)) and not speaks_legacy_sse(refused(500))
    assert not speaks_legacy_sse(ConnectFailed("could not connect"))
