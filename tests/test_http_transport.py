"""The Streamable HTTP transport against scripted exchanges on ``httpx2.MockTransport``: no sockets, and
trio's virtual clock for every wait, so backoff and ``retry:`` timings are asserted exactly."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
import trio
import trio.testing

from runner.errors import (
    CallTimeout,
    ConnectFailed,
    HTTPStatusError,
    NotDelivered,
    OutcomeUnknown,
    SessionExpired,
    Throttled,
    TransportError,
)
from runner.protocol.jsonrpc import InvalidMessage, Notification, Request, Response
from runner.session import SessionOptions, open_session
from runner.transports.base import RequestLost, StreamResumed, TransportEvent
from runner.transports.http.streams import GET_HEAD_WAIT
from runner.transports.http.transport import HttpParams, HttpTransport, open_http_transport

URL = "http://mcp.test/mcp"

# -- a scripted server ------------------------------------------------------------------------------


class Hang:
    """Stream item: keep the connection open (until the client closes it)."""


class Wait:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


Item = bytes | BaseException | Hang | Wait


class ScriptedStream(httpx2.AsyncByteStream):
    """A response body that yields chunks, waits, hangs, or raises (a cut connection) where scripted."""

    def __init__(self, *items: Item) -> None:
        self.items = items
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for item in self.items:
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, Hang):
                await trio.sleep_forever()
            elif isinstance(item, Wait):
                await trio.sleep(item.seconds)
            else:
                yield item

    async def aclose(self) -> None:
        self.closed = True


def event(data: Any = "", *, id: str | None = None, retry: int | None = None) -> bytes:
    """One SSE event; ``data`` that is not a string is JSON-encoded."""
    lines = []
    if id is not None:
        lines.append(f"id: {id}")
    if retry is not None:
        lines.append(f"retry: {retry}")
    text = data if isinstance(data, str) else json.dumps(data)
    lines.extend(f"data: {part}" for part in text.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


def result(rid: int, value: Any = "ok") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"value": value}}


def progress(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": n}}


def sse(*items: Item, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(
        200, headers={"content-type": "text/event-stream", **(headers or {})}, stream=ScriptedStream(*items)
    )


def json_response(body: Any, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(200, json=body, headers=headers)


@dataclass
class Seen:
    method: str
    headers: httpx2.Headers
    body: Any
    time: float

    @property
    def rpc_id(self) -> Any:
        return self.body.get("id") if isinstance(self.body, dict) else None

    @property
    def rpc_method(self) -> Any:
        return self.body.get("method") if isinstance(self.body, dict) else None


Handler = Callable[[Seen], Awaitable[httpx2.Response]]


class Server:
    """Records every HTTP request (with the virtual time it arrived) and answers with ``handler``."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.seen: list[Seen] = []

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        raw = await request.aread()
        body = json.loads(raw) if raw else None
        seen = Seen(request.method, request.headers, body, trio.current_time())
        self.seen.append(seen)
        return await self.handler(seen)

    def of(self, method: str) -> list[Seen]:
        return [s for s in self.seen if s.method == method]

    def posts_of(self, rid: Any) -> list[Seen]:
        return [s for s in self.seen if s.method == "POST" and s.rpc_id == rid]


def params(**overrides: Any) -> HttpParams:
    base: dict[str, Any] = {"url": URL, "jitter": 0.0, "open_get_stream": False}
    base.update(overrides)
    return HttpParams(**base)


@asynccontextmanager
async def connect(handler: Handler, **overrides: Any) -> AsyncIterator[tuple[HttpTransport, Server]]:
    server = Server(handler)
    async with (
        httpx2.AsyncClient(transport=httpx2.MockTransport(server)) as client,
        open_http_transport(params(**overrides), client=client) as transport,
    ):
        yield transport, server


RESUMED: dict[int, list[StreamResumed]] = {}


async def receive_all(transport: HttpTransport, n: int) -> list[TransportEvent]:
    """The next ``n`` events, not counting ``StreamResumed`` notices (kept in ``RESUMED[id(transport)]``)."""
    out: list[TransportEvent] = []
    while len(out) < n:
        event = await transport.receive()
        if isinstance(event, StreamResumed):
            RESUMED.setdefault(id(transport), []).append(event)
        else:
            out.append(event)
    return out


async def next_event(transport: HttpTransport) -> TransportEvent:
    """The next event that is not a ``StreamResumed`` notice."""
    (event,) = await receive_all(transport, 1)
    return event


async def nothing_more(transport: HttpTransport, wait: float = 1000.0) -> None:
    with trio.move_on_after(wait):
        while True:
            extra = await transport.receive()
            if isinstance(extra, StreamResumed):
                RESUMED.setdefault(id(transport), []).append(extra)
                continue
            pytest.fail(f"unexpected event {extra!r}")


INIT = Request(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})


# -- headers ------------------------------------------------------------------------------------------


async def test_post_headers_session_id_and_protocol_version(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if req.rpc_method == "initialize":
            return json_response(result(0), headers={"Mcp-Session-Id": "sess-1"})
        if req.rpc_id is None:
            return httpx2.Response(202)
        return json_response(result(req.rpc_id))

    async with connect(handler, headers={"Authorization": "Bearer secret"}) as (t, server):
        await t.send(INIT)
        assert await next_event(t) == Response(0, {"value": "ok"})
        assert t.session_id == "sess-1"
        await t.send(Notification("notifications/initialized"))
        t.set_protocol_version("2025-11-25")
        await t.send(Request(1, "tools/list"))
        assert await next_event(t) == Response(1, {"value": "ok"})

    init, initialized, listed, delete = server.seen
    for s in (init, initialized, listed):
        assert s.method == "POST"
        assert s.headers["accept"] == "application/json, text/event-stream"
        assert s.headers["content-type"] == "application/json"
        assert s.headers["authorization"] == "Bearer secret"
    assert "mcp-session-id" not in init.headers
    assert initialized.headers["mcp-session-id"] == "sess-1"
    assert "mcp-protocol-version" not in initialized.headers
    assert listed.headers["mcp-session-id"] == "sess-1"
    assert listed.headers["mcp-protocol-version"] == "2025-11-25"
    assert delete.method == "DELETE"
    assert delete.headers["mcp-session-id"] == "sess-1"


async def test_session_id_only_from_the_initialize_response(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return json_response(result(req.rpc_id), headers={"Mcp-Session-Id": f"from-{req.rpc_method}"})

    async with connect(handler) as (t, _):
        await t.send(Request(5, "ping"))
        await next_event(t)
        assert t.session_id is None
        await t.send(INIT)
        await next_event(t)
        assert t.session_id == "from-initialize"


async def test_invalid_session_id_is_refused(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return json_response(result(0), headers={"Mcp-Session-Id": "has space"})

    async with connect(handler) as (t, _):
        with pytest.raises(ConnectFailed, match="invalid Mcp-Session-Id"):
            await t.send(INIT)


# -- JSON and SSE bodies ------------------------------------------------------------------------------


async def test_json_response(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return json_response(result(req.rpc_id, "json"))

    async with connect(handler) as (t, _):
        await t.send(Request(1, "tools/call", {"name": "echo"}))
        assert await next_event(t) == Response(1, {"value": "json"})


async def test_json_array_body_and_related_notifications(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return json_response([progress(1), result(req.rpc_id)])

    async with connect(handler) as (t, _):
        await t.send(Request(7, "tools/call"))
        note, resp = await receive_all(t, 2)
    assert note == Notification("notifications/progress", {"progressToken": "t", "progress": 1}, related_request_id=7)
    assert resp == Response(7, {"value": "ok"})


async def test_json_body_without_the_response_is_lost(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return json_response(result(999))

    async with connect(handler) as (t, _):
        await t.send(Request(1, "tools/call"))
        stray = await next_event(t)  # an id never sent here: the session counts and warns about it
        lost = await next_event(t)
    assert stray == Response(999, {"value": "ok"})
    assert isinstance(lost, RequestLost) and lost.request_id == 1
    assert isinstance(lost.error, OutcomeUnknown)


async def test_invalid_json_body_is_passed_through(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(
            200, content=b'{"jsonrpc":"2.0","id":1,"result":3}', headers={"content-type": "application/json"}
        )

    async with connect(handler) as (t, _):
        await t.send(Request(1, "tools/call"))
        bad = await next_event(t)
        assert isinstance(bad, InvalidMessage) and bad.request_id == 1
        await nothing_more(t)  # the call is answered (badly): no RequestLost as well


async def test_sse_response_with_priming_event(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return sse(
            b": keep-alive comment\n\n",
            event("", id="e0", retry=300),
            event(progress(1), id="e1"),
            event({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}),
            event(result(req.rpc_id), id="e2"),
        )

    async with connect(handler) as (t, server):
        await t.send(Request(3, "tools/call"))
        events = await receive_all(t, 3)
        await nothing_more(t)
    assert events == [
        Notification("notifications/progress", {"progressToken": "t", "progress": 1}, related_request_id=3),
        Notification("notifications/message", {"level": "info", "data": "x"}, related_request_id=3),
        Response(3, {"value": "ok"}),
    ]
    assert [s.method for s in server.seen] == ["POST"]


async def test_send_returns_before_the_stream_is_read(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return sse(event("", id=f"p{req.rpc_id}"), Wait(10), event(result(req.rpc_id), id=f"r{req.rpc_id}"))

    async with connect(handler) as (t, _):
        start = trio.current_time()
        for rid in range(1, 21):
            await t.send(Request(rid, "tools/call"))
        assert trio.current_time() == start  # twenty calls in flight at once
        got = await receive_all(t, 20)
        assert trio.current_time() == start + 10
    assert sorted(e.id for e in got if isinstance(e, Response)) == list(range(1, 21))


async def test_server_request_on_the_stream_and_our_answer(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if req.body.get("result") is not None:
            return httpx2.Response(202)
        return sse(event({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}, id="a"), event(result(1), id="b"))

    async with connect(handler) as (t, server):
        await t.send(Request(1, "tools/call"))
        ping, resp = await receive_all(t, 2)
        assert ping == Request("srv-1", "ping")
        await t.send(Response("srv-1", {}))
    assert resp == Response(1, {"value": "ok"})
    answer = server.seen[1]
    assert answer.method == "POST" and answer.body == {"jsonrpc": "2.0", "id": "srv-1", "result": {}}


# -- resumption ---------------------------------------------------------------------------------------

STREAM = [
    event("", id="e0", retry=500),
    event(progress(1), id="e1"),
    event(progress(2), id="e2"),
    event(result(1), id="e3"),
]


@pytest.mark.parametrize("cut_after", [0, 1, 2])
@pytest.mark.parametrize("how", ["read-error", "clean-end"])
async def test_stream_cut_after_each_event_is_resumed_by_get(
    autojump_clock: trio.abc.Clock, cut_after: int, how: str
) -> None:
    cut: list[Item] = [Wait(2), httpx2.ReadError("connection reset")] if how == "read-error" else [Wait(2)]

    async def handler(req: Seen) -> httpx2.Response:
        if req.method == "POST":
            return sse(*STREAM[: cut_after + 1], *cut)
        last = int(req.headers["last-event-id"][1:])
        return sse(*STREAM[last + 1 :])

    async with connect(handler) as (t, server):
        await t.send(Request(1, "tools/call"))
        events = await receive_all(t, 3)
        await nothing_more(t)
        assert RESUMED.pop(id(t)) == [StreamResumed(1, f"e{cut_after}")]

    assert events == [
        Notification("notifications/progress", {"progressToken": "t", "progress": 1}, related_request_id=1),
        Notification("notifications/progress", {"progressToken": "t", "progress": 2}, related_request_id=1),
        Response(1, {"value": "ok"}),
    ]
    (get,) = server.of("GET")
    assert get.headers["last-event-id"] == f"e{cut_after}"
    assert get.headers["accept"] == "text/event-stream"
    assert get.time == 2 + 0.5  # exactly the server's retry: after the drop, no jitter
    assert len(server.posts_of(1)) == 1  # never re-POSTed


async def test_stream_cut_after_the_response_needs_no_resumption(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return sse(*STREAM, httpx2.ReadError("reset"))

    async with connect(handler) as (t, server):
        await t.send(Request(1, "tools/call"))
        assert len(await receive_all(t, 3)) == 3
        await nothing_more(t)
    assert server.of("GET") == []


async def test_resumption_carries_session_and_protocol_headers(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if req.rpc_method == "initialize":
            return json_response(result(0), headers={"mcp-session-id": "S"})
        if req.method == "POST":
            return sse(event("", id="x1"))
        return sse(event(result(1), id="x2"))

    async with connect(handler) as (t, server):
        await t.send(INIT)
        await next_event(t)
        t.set_protocol_version("2025-06-18")
        await t.send(Request(1, "tools/call"))
        assert await next_event(t) == Response(1, {"value": "ok"})
    (get,) = server.of("GET")
    assert get.headers["mcp-session-id"] == "S"
    assert get.headers["mcp-protocol-version"] == "2025-06-18"
    assert get.headers["last-event-id"] == "x1"
    assert get.time == 1.0  # no retry: from the server: default_retry_ms


async def test_resumed_stream_dropping_before_a_new_id_keeps_the_old_id(autojump_clock: trio.abc.Clock) -> None:
    gets = 0

    async def handler(req: Seen) -> httpx2.Response:
        nonlocal gets
        if req.method == "POST":
            return sse(event("", id="a", retry=100), event(progress(1), id="b"))
        gets += 1
        if gets == 1:
            return sse(b": nothing yet\n\n", httpx2.RemoteProtocolError("peer closed"))
        if gets == 2:
            return sse(b'data: {"partial', httpx2.ReadError("reset"))  # an event cut in the middle
        return sse(event(result(1), id="c"))

    async with connect(handler) as (t, server):
        await t.send(Request(1, "tools/call"))
        events = await receive_all(t, 2)
    assert events[1] == Response(1, {"value": "ok"})
    assert [g.headers["last-event-id"] for g in server.of("GET")] == ["b", "b", "b"]
    # 0.1 s (the server's retry:), then backing off from it: +0.2, +0.4
    assert [g.time for g in server.of("GET")] == [pytest.approx(0.1), pytest.approx(0.3), pytest.approx(0.7)]


async def test_replayed_events_are_delivered_once(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if req.method == "POST":
            return sse(event("", id="p0", retry=10), event(progress(1), id="p1"), event(progress(2), id="p2"))
        # A server that replays everything it has, including another stream's events (server-everything
        # does this): a response to an id at or below the last one sent (a replay, or late), and one to an id
        # never sent here.
        return sse(
            event("", id="p0"),
            event(progress(1), id="p1"),
            event(result(0, "answered before"), id="q0"),
            event(result(42, "someone else's"), id="q1"),
            event(progress(2), id="p2"),
            event(progress(3), id="p3"),
            event(result(1), id="p4"),
        )

    async with connect(handler) as (t, server):
        await t.send(Request(1, "tools/call"))
        events = await receive_all(t, 5)
        await nothing_more(t)
    assert [e.params["progress"] for e in events if isinstance(e, Notification) and e.params] == [1, 2, 3]
    # the replay (0) is dropped; 42 was never sent here: it goes on, and the session tells the user
    assert [e.id for e in events if isinstance(e, Response)] == [42, 1]
    assert len(server.posts_of(1)) == 1


async def test_response_delivered_on_another_stream_stops_the_reader(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if req.rpc_id == 1:
            return sse(event("", id="a1"), Hang())
        # request 2's stream carries request 1's response too (a replaying server)
        return sse(event(result(1), id="a2"), event(result(2), id="b2"))

    async with connect(handler) as (t, server):
        await t.send(Request(1, "tools/call"))
        await t.send(Request(2, "tools/call"))
        events = await receive_all(t, 2)
        await nothing_more(t)
    assert events == [Response(1, {"value": "ok"}), Response(2, {"value": "ok"})]
    assert server.of("GET") == []


async def test_no_event_id_means_outcome_unknown_without_get(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return sse(event(progress(1)), httpx2.ReadError("reset"))

    async with connect(handler) as (t, server):
        await t.send(Request(1, "tools/call"))
        note, lost = await receive_all(t, 2)
    assert isinstance(note, Notification)
    assert isinstance(lost, RequestLost) and lost.request_id == 1
    assert isinstance(lost.error, OutcomeUnknown)
    assert server.of("GET") == [] and len(server.posts_of(1)) == 1


async def test_resumption_budget_attempts_spent(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if req.method == "POST":
            return sse(event("", id="a", retry=1000))
        return httpx2.Response(503)

    async with connect(handler, resume_attempts=3, resume_timeout=1000.0) as (t, server):
        await t.send(Request(1, "tools/call"))
        lost = await next_event(t)
    assert isinstance(lost, RequestLost) and isinstance(lost.error, OutcomeUnknown)
    assert "gave up after 3 reconnects" in str(lost.error)
    assert [g.time for g in server.of("GET")] == [1.0, 3.0, 7.0]
    assert trio.current_time() == 7.0  # given up at once, not after another wait
    assert len(server.posts_of(1)) == 1


async def test_resumption_budget_time_spent(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if req.method == "POST":
            return sse(event("", id="a"))
        raise httpx2.ConnectError("refused")

    async with connect(handler, resume_attempts=100, resume_timeout=10.0) as (t, server):
        await t.send(Request(1, "tools/call"))
        lost = await next_event(t)
    assert isinstance(lost, RequestLost) and isinstance(lost.error, OutcomeUnknown)
    # 1, 2, 4 s waits fit in 10 s; the next (8 s) would end past it
    assert [g.time for g in server.of("GET")] == [1.0, 3.0, 7.0]


async def test_productive_reconnects_renew_the_budget(autojump_clock: trio.abc.Clock) -> None:
    """A server that closes the connection after every event (SEP-1699 polling) keeps a long call alive."""

    async def handler(req: Seen) -> httpx2.Response:
        if req.method == "POST":
            return sse(event("", id="0", retry=50))
        n = int(req.headers["last-event-id"]) + 1
        if n < 20:
            return sse(event(progress(n), id=str(n)))
        return sse(event(result(1), id=str(n)))

    async with connect(handler, resume_attempts=2) as (t, server):
        await t.send(Request(1, "tools/call"))
        events = await receive_all(t, 20)
    assert events[-1] == Response(1, {"value": "ok"})
    assert len(server.of("GET")) == 20
    assert server.of("GET")[-1].time == pytest.approx(20 * 0.05)


@pytest.mark.parametrize("status", [400, 403, 405])
async def test_get_refused_means_outcome_unknown(autojump_clock: trio.abc.Clock, status: int) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if req.method == "POST":
            return sse(event("", id="a"))
        return httpx2.Response(status)

    async with connect(handler) as (t, server):
        await t.send(Request(1, "tools/call"))
        lost = await next_event(t)
        await nothing_more(t)
    assert isinstance(lost, RequestLost) and isinstance(lost.error, OutcomeUnknown)
    assert str(status) in str(lost.error)
    assert len(server.of("GET")) == 1


async def test_oversized_event_loses_the_call(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return sse(event("", id="a"), event(result(1, "x" * 5000), id="b"))

    async with connect(handler, max_event_bytes=1000) as (t, server):
        await t.send(Request(1, "tools/call"))
        lost = await next_event(t)
    assert isinstance(lost, RequestLost) and isinstance(lost.error, OutcomeUnknown)
    assert server.of("GET") == []
    # the message names the cap and the option that raises it
    assert str(lost.error).startswith("the response stream of request 1 was lost: a server-sent event exceeded ")
    assert "the 1,000-byte cap" in str(lost.error) and "--max-message-size" in str(lost.error)


async def test_an_oversized_json_body_loses_the_call_and_says_why(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return json_response(result(1, "x" * 5000))

    async with connect(handler, max_event_bytes=1000) as (t, _server):
        await t.send(Request(1, "tools/call"))
        lost = await next_event(t)
    assert isinstance(lost, RequestLost) and isinstance(lost.error, OutcomeUnknown)
    assert str(lost.error).startswith("the JSON response to 1 was lost: a JSON response exceeded the 1,000-byte cap")
    assert str(lost.error).endswith("raise the limit with --max-message-size if this is expected")


# -- session expiry -----------------------------------------------------------------------------------


async def test_404_expires_the_session(autojump_clock: trio.abc.Clock) -> None:
    sessions = iter(["s1", "s2"])

    async def handler(req: Seen) -> httpx2.Response:
        if req.rpc_method == "initialize":
            return json_response(result(req.rpc_id), headers={"mcp-session-id": next(sessions)})
        if req.rpc_id == 1:
            return sse(event("", id="a"), Hang())  # a long call, streaming when the session dies
        if req.headers.get("mcp-session-id") == "s1":
            return httpx2.Response(404)
        return json_response(result(req.rpc_id))

    async with connect(handler) as (t, server):
        await t.send(INIT)
        await next_event(t)
        await t.send(Request(1, "tools/call"))
        with pytest.raises(SessionExpired) as info:
            await t.send(Request(2, "tools/call"))
        assert isinstance(info.value.__cause__, HTTPStatusError)
        assert info.value.__cause__.status_code == 404
        assert t.session_id is None
        lost = await next_event(t)
        assert isinstance(lost, RequestLost) and lost.request_id == 1
        assert isinstance(lost.error, OutcomeUnknown)
        await nothing_more(t, 10)  # request 2 is reported by the exception only

        await t.send(Request(10, "initialize"))  # the session layer re-initializes...
        assert "mcp-session-id" not in server.seen[-1].headers
        await next_event(t)
        await t.send(Request(3, "tools/call"))  # ...and resends with a new id
        assert await next_event(t) == Response(3, {"value": "ok"})
    assert server.posts_of(3)[0].headers["mcp-session-id"] == "s2"
    assert len(server.posts_of(2)) == 1


TS_SDK_UNKNOWN_SESSION = {
    "jsonrpc": "2.0",
    "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"},
    "id": None,
}


@pytest.mark.parametrize(
    ("body", "expired"),
    [
        (TS_SDK_UNKNOWN_SESSION, True),  # a TypeScript-SDK server restarted: it answers 400, not 404
        ({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid params"}, "id": None}, False),
    ],
)
async def test_400_naming_the_session_expires_it(
    autojump_clock: trio.abc.Clock, body: dict[str, Any], expired: bool
) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if req.rpc_method == "initialize":
            return json_response(result(req.rpc_id), headers={"mcp-session-id": "s1"})
        return httpx2.Response(400, json=body)

    async with connect(handler) as (t, _):
        await t.send(INIT)
        await next_event(t)
        with pytest.raises(HTTPStatusError if not expired else SessionExpired) as info:
            await t.send(Request(2, "tools/call"))
        assert isinstance(info.value, SessionExpired) is expired
        assert (t.session_id is None) is expired
        if expired:
            assert "No valid session ID provided" in str(info.value)


async def test_400_without_a_session_id_is_a_plain_status_error(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(400, json=TS_SDK_UNKNOWN_SESSION)

    async with connect(handler) as (t, _):
        with pytest.raises(HTTPStatusError) as info:
            await t.send(Request(1, "tools/call"))
    assert not isinstance(info.value, SessionExpired)


async def test_404_without_a_session_id_is_a_plain_status_error(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(404)

    async with connect(handler) as (t, _):
        with pytest.raises(HTTPStatusError) as info:
            await t.send(Request(1, "tools/call"))
    assert not isinstance(info.value, SessionExpired)
    assert info.value.status_code == 404


async def test_404_on_resumption_expires_the_session(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if req.rpc_method == "initialize":
            return json_response(result(0), headers={"mcp-session-id": "s1"})
        if req.method == "POST":
            return sse(event("", id=f"p{req.rpc_id}"), Wait(req.rpc_id), httpx2.ReadError("reset"))
        return httpx2.Response(404)

    async with connect(handler) as (t, server):
        await t.send(INIT)
        await next_event(t)
        await t.send(Request(1, "tools/call"))
        await t.send(Request(2, "tools/call"))
        lost = await receive_all(t, 2)
        assert t.session_id is None
        posts = len(server.of("POST"))
        # Anything but a new `initialize` now fails as not delivered, without a POST that would carry no
        # session id (a server answers that 400 "missing session ID"): the session re-initializes.
        with pytest.raises(SessionExpired):
            await t.send(Request(3, "tools/call"))
        with pytest.raises(SessionExpired):
            await t.send(Notification("notifications/initialized"))
        assert len(server.of("POST")) == posts
        await t.send(INIT)  # a new session...
        await next_event(t)
        await t.send(Notification("notifications/initialized"))  # ...and everything goes again
    assert {e.request_id for e in lost if isinstance(e, RequestLost)} == {1, 2}
    assert all(isinstance(e, RequestLost) and isinstance(e.error, OutcomeUnknown) for e in lost)
    assert len(server.of("GET")) == 1  # the second stream learned of the expiry without asking


# -- statuses and errors of the POST ------------------------------------------------------------------


async def test_redirect_is_not_followed(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(307, headers={"location": "http://elsewhere.test/mcp"})

    async with connect(handler) as (t, server):
        with pytest.raises(HTTPStatusError) as info:
            await t.send(Request(1, "tools/call"))
    assert info.value.status_code == 307
    assert info.value.location == "http://elsewhere.test/mcp"
    assert "http://elsewhere.test/mcp" in str(info.value)
    assert len(server.seen) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 405, 413])
async def test_4xx_is_rejected_with_its_status(autojump_clock: trio.abc.Clock, status: int) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(
            status, json={"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "nope"}}
        )

    async with connect(handler) as (t, server):
        with pytest.raises(HTTPStatusError) as info:
            await t.send(Request(1, "tools/call"))
    assert info.value.status_code == status
    assert "nope (-32600)" in str(info.value)
    assert len(server.seen) == 1  # no retry


@pytest.mark.parametrize("status", [500, 502, 504])
async def test_5xx_on_a_call_is_outcome_unknown(autojump_clock: trio.abc.Clock, status: int) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(status, text="upstream died")

    async with connect(handler) as (t, server):
        with pytest.raises(OutcomeUnknown) as info:
            await t.send(Request(1, "tools/call"))
    cause = info.value.__cause__
    assert isinstance(cause, HTTPStatusError) and cause.status_code == status
    assert len(server.seen) == 1  # never re-POSTed


@pytest.mark.parametrize("message", [INIT, Notification("notifications/initialized")])
async def test_5xx_on_initialize_or_a_notification_is_a_status_error(
    autojump_clock: trio.abc.Clock, message: Request | Notification
) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(503)

    async with connect(handler) as (t, _):
        with pytest.raises(HTTPStatusError) as info:
            await t.send(message)
    assert info.value.status_code == 503


@pytest.mark.parametrize(
    "error", [httpx2.ConnectError("refused"), httpx2.ConnectTimeout("slow"), httpx2.PoolTimeout("full")]
)
async def test_a_post_that_could_not_connect_is_not_delivered_at_once(
    autojump_clock: trio.abc.Clock, error: Exception
) -> None:
    # Not retried here: the session's owner waits for the server (one schedule, printed as slept).
    async def handler(req: Seen) -> httpx2.Response:
        raise error

    async with connect(handler, send_attempts=4, backoff_initial=1.0) as (t, server):
        with pytest.raises(NotDelivered) as info:
            await t.send(Request(1, "tools/call"))
    assert type(info.value) is NotDelivered and info.value.__cause__ is error
    assert [s.time for s in server.seen] == [0.0]


@pytest.mark.parametrize("status", [429, 503])
async def test_429_or_503_to_a_call_is_throttled_not_delivered(autojump_clock: trio.abc.Clock, status: int) -> None:
    # Refused before it ran: not delivered (safe to resend), and not retried here: the server's link pauses
    # every call to it and the call goes out again (runner.engine.calls.pace).
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(status, headers={"retry-after": "2"}, text="slow down")

    async with connect(handler) as (t, server):
        with pytest.raises(Throttled) as info:
            await t.send(Request(1, "tools/call"))
    error = info.value
    assert isinstance(error, NotDelivered) and error.status_code == status and error.retry_after == 2.0
    assert f"server answered {status}" in str(error) and "slow down" in str(error)
    assert isinstance(error.__cause__, HTTPStatusError) and error.__cause__.status_code == status
    assert [s.time for s in server.seen] == [0.0]


async def test_a_bare_503_to_a_call_is_in_doubt_not_resent(autojump_clock: trio.abc.Clock) -> None:
    # No Retry-After, no retry_after in the body: a proxy in front of the server may answer 503 after it
    # forwarded the call (an upstream that timed out), so the call may have run.
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(503, text="upstream timed out")

    async with connect(handler) as (t, server):
        with pytest.raises(OutcomeUnknown) as info:
            await t.send(Request(1, "tools/call"))
    assert not isinstance(info.value, NotDelivered)
    assert "503" in str(info.value) and "may have run" in str(info.value)
    assert len(server.seen) == 1


async def test_a_503_with_retry_after_in_its_body_is_throttled(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(
            503,
            json={"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "busy", "data": {"retry_after": 2}}},
        )

    async with connect(handler) as (t, server):
        with pytest.raises(Throttled) as info:
            await t.send(Request(1, "tools/call"))
    assert info.value.status_code == 503 and info.value.retry_after == 2.0
    assert len(server.seen) == 1


async def test_throttled_with_an_http_date(autojump_clock: trio.abc.Clock) -> None:
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    async def handler(req: Seen) -> httpx2.Response:
        when = datetime.now(UTC) + timedelta(seconds=20)
        return httpx2.Response(429, headers={"retry-after": format_datetime(when, usegmt=True)})

    async with connect(handler) as (t, _):
        with pytest.raises(Throttled) as info:
            await t.send(Request(1, "tools/call"))
    assert info.value.retry_after is not None and 18.0 <= info.value.retry_after <= 20.0


@pytest.mark.parametrize(
    ("body", "seconds"),
    [
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "busy", "data": {"retry_after": 3}}}, 3.0),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "busy", "retry_after_seconds": 1.5}}, 1.5),
        ({"error": "rate limited", "retry_after_seconds": 4}, 4.0),
        ({"error": "rate limited"}, None),
    ],
)
async def test_throttled_reads_retry_after_from_the_error_body(
    autojump_clock: trio.abc.Clock, body: dict[str, Any], seconds: float | None
) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(429, json=body)

    async with connect(handler) as (t, _):
        with pytest.raises(Throttled) as info:
            await t.send(Request(1, "tools/call"))
    assert info.value.retry_after == seconds


async def test_the_retry_after_header_wins_over_the_body(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(429, headers={"retry-after": "1"}, json={"retry_after": 9})

    async with connect(handler) as (t, _):
        with pytest.raises(Throttled) as info:
            await t.send(Request(1, "tools/call"))
    assert info.value.retry_after == 1.0


async def test_429_to_initialize_backs_off_with_bounded_jitter(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(429)

    async with connect(handler, send_attempts=3, backoff_initial=1.0, jitter=0.5) as (t, server):
        with pytest.raises(HTTPStatusError):
            await t.send(INIT)
    first, second, third = (s.time for s in server.seen)
    assert 1.0 <= second - first <= 1.5 and 2.0 <= third - second <= 2.5


async def test_429_to_initialize_retries_bounded_in_time(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(429)

    async with connect(handler, send_attempts=100, send_max_time=5.0, backoff_initial=1.0, jitter=0.0) as (t, server):
        with pytest.raises(HTTPStatusError):
            await t.send(INIT)
    assert [s.time for s in server.seen] == [0.0, 1.0, 3.0]  # a wait of 4 s more would end past 5 s


@pytest.mark.parametrize(
    "error", [httpx2.ReadError("reset"), httpx2.WriteError("broken pipe"), httpx2.RemoteProtocolError("closed")]
)
async def test_failure_after_sending_is_never_reposted(autojump_clock: trio.abc.Clock, error: Exception) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        raise error

    async with connect(handler) as (t, server):
        with pytest.raises(OutcomeUnknown) as info:
            await t.send(INIT)
    assert info.value.__cause__ is error
    assert len(server.seen) == 1


async def test_429_to_initialize_waits_for_retry_after(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if len(server.seen) == 1:
            return httpx2.Response(429, headers={"retry-after": "3"})
        return json_response(result(0))

    async with connect(handler) as (t, server):
        await t.send(INIT)
        assert await next_event(t) == Response(0, {"value": "ok"})
    assert [s.time for s in server.seen if s.method == "POST"] == [0.0, 3.0]


async def test_429_to_initialize_with_an_http_date(autojump_clock: trio.abc.Clock) -> None:
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    async def handler(req: Seen) -> httpx2.Response:
        if len(server.seen) == 1:
            when = datetime.now(UTC) + timedelta(seconds=20)
            return httpx2.Response(429, headers={"retry-after": format_datetime(when, usegmt=True)})
        return json_response(result(0))

    async with connect(handler) as (t, server):
        await t.send(INIT)
        await next_event(t)
    second = server.seen[1].time
    assert 18.0 <= second <= 20.0  # the date has a one-second resolution


async def test_429_to_initialize_gives_up_with_the_status(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(429, headers={"retry-after": "2"})

    async with connect(handler, send_attempts=3) as (t, server):
        with pytest.raises(HTTPStatusError) as info:
            await t.send(INIT)
    assert info.value.status_code == 429 and type(info.value) is HTTPStatusError
    assert info.value.__cause__ is None and info.value.__suppress_context__  # the retry's own error stays inside
    assert [s.time for s in server.seen] == [0.0, 2.0, 4.0]


async def test_a_cancelled_429_wait_on_initialize_sends_nothing_more(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(429, headers={"retry-after": "10"})

    async with connect(handler) as (t, server):
        with trio.move_on_after(5):
            await t.send(INIT)
        await trio.sleep(100)
    assert [s.time for s in server.seen] == [0.0]


async def test_429_to_initialize_asking_too_long_a_wait_fails_at_once(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(429, headers={"retry-after": "3600"})

    async with connect(handler, send_max_time=60.0) as (t, server):
        with pytest.raises(HTTPStatusError):
            await t.send(INIT)
    assert trio.current_time() < 1 and len(server.seen) == 1


async def test_unexpected_content_type_on_a_call(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(202)

    async with connect(handler) as (t, _):
        with pytest.raises(OutcomeUnknown, match="neither JSON nor an event stream"):
            await t.send(Request(1, "tools/call"))


# -- the standalone GET stream ------------------------------------------------------------------------


async def test_get_stream_opened_after_the_handshake(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if req.method == "GET":
            log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "tick"}}
            return sse(Wait(15), event(log, id="g1"), Hang())  # server-everything: nothing for 15 s
        if req.rpc_method == "initialize":
            return json_response(result(0), headers={"mcp-session-id": "S"})
        return httpx2.Response(202) if req.rpc_id is None else json_response(result(req.rpc_id))

    async with connect(handler, open_get_stream=True) as (t, server):
        await t.send(INIT)
        await next_event(t)
        assert server.of("GET") == []
        t.set_protocol_version("2025-11-25")
        await t.send(Notification("notifications/initialized"))
        await t.send(Request(1, "tools/call"))  # not blocked by the silent GET stream
        assert await next_event(t) == Response(1, {"value": "ok"})
        assert trio.current_time() == 0
        note = await next_event(t)
        assert note == Notification("notifications/message", {"level": "info", "data": "tick"}, None)
    (get,) = server.of("GET")
    assert get.headers["mcp-session-id"] == "S" and get.headers["accept"] == "text/event-stream"
    assert "last-event-id" not in get.headers


@pytest.mark.parametrize(("head_after", "posted_at"), [(0.3, 0.3), (None, GET_HEAD_WAIT)])
async def test_the_get_stream_is_answered_before_the_next_post(
    autojump_clock: trio.abc.Clock, head_after: float | None, posted_at: float
) -> None:
    """The server sees the session's GET stream before its next message (conformance's sse-retry server
    takes any GET after a tools/call for the resumption of that call's stream); a GET whose head never
    comes holds that message back ``GET_HEAD_WAIT`` seconds at most."""

    async def handler(req: Seen) -> httpx2.Response:
        if req.method == "GET":
            if head_after is None:
                await trio.sleep_forever()
            await trio.sleep(head_after)
            return sse(event("", id="g0"), Hang())
        if req.rpc_method == "initialize":
            return json_response(result(0), headers={"mcp-session-id": "S"})
        return httpx2.Response(202) if req.rpc_id is None else json_response(result(req.rpc_id))

    async with connect(handler, open_get_stream=True) as (t, server):
        await t.send(INIT)
        await next_event(t)
        t.set_protocol_version("2025-11-25")
        await t.send(Notification("notifications/initialized"))
        assert [s.method for s in server.seen] == ["POST", "GET", "POST"]
        assert server.seen[2].time == pytest.approx(posted_at)
        await t.send(Request(1, "tools/call"))  # no GET starting now: no wait
        assert server.seen[3].time == pytest.approx(posted_at)
        assert await next_event(t) == Response(1, {"value": "ok"})


async def test_get_stream_405_stops_silently(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return httpx2.Response(405) if req.method == "GET" else json_response(result(req.rpc_id))

    async with connect(handler, open_get_stream=True) as (t, server):
        t.set_protocol_version("2025-11-25")
        await nothing_more(t, 100)
        await t.send(Request(1, "tools/call"))
        assert await next_event(t) == Response(1, {"value": "ok"})
    assert len(server.of("GET")) == 1


async def test_get_stream_reconnects_with_last_event_id_and_gives_up(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        n = len(server.of("GET"))
        if n == 1:
            return sse(event({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, id="g1", retry=200))
        if n == 2:
            raise httpx2.ConnectError("down")
        return httpx2.Response(500)

    async with connect(handler, open_get_stream=True, get_stream_attempts=3) as (t, server):
        t.set_protocol_version("2025-11-25")
        assert await next_event(t) == Notification("notifications/tools/list_changed", None, None)
        await nothing_more(t, 100)
        gets = server.of("GET")
        assert [g.time for g in gets] == pytest.approx([0.0, 0.2, 0.6, 1.4])
        assert [g.headers.get("last-event-id") for g in gets] == [None, "g1", "g1", "g1"]
        # the transport still works
        assert t.describe() == URL


# -- closing ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 204, 405, 500])
async def test_delete_on_close(autojump_clock: trio.abc.Clock, status: int) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if req.method == "DELETE":
            return httpx2.Response(status)
        return json_response(result(0), headers={"mcp-session-id": "S"})

    async with connect(handler) as (t, server):
        await t.send(INIT)
        await next_event(t)
    assert server.seen[-1].method == "DELETE" and server.seen[-1].headers["mcp-session-id"] == "S"


async def test_no_delete_without_a_session(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return json_response(result(0))

    async with connect(handler) as (t, server):
        await t.send(INIT)
        await next_event(t)
    assert [s.method for s in server.seen] == ["POST"]


async def test_hanging_delete_is_bounded_and_readers_are_cancelled(autojump_clock: trio.abc.Clock) -> None:
    streams: list[ScriptedStream] = []

    async def handler(req: Seen) -> httpx2.Response:
        if req.method == "DELETE":
            await trio.sleep_forever()
        if req.rpc_method == "initialize":
            return json_response(result(0), headers={"mcp-session-id": "S"})
        response = sse(event("", id="a"), Hang())
        assert isinstance(response.stream, ScriptedStream)
        streams.append(response.stream)
        return response

    async with connect(handler, close_timeout=2.0) as (t, _):
        await t.send(INIT)
        await next_event(t)
        await t.send(Request(1, "tools/call"))
        await trio.sleep(1)
    assert trio.current_time() == 3.0
    assert streams[0].closed
    with pytest.raises(TransportError, match="closed"):
        await next_event(t)
    with pytest.raises(NotDelivered):
        await t.send(Request(2, "tools/call"))


async def test_body_exception_propagates_unwrapped(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        return json_response(result(0))

    with pytest.raises(KeyError):
        async with connect(handler):
            raise KeyError("mine")


async def test_owned_client_is_created_and_closed() -> None:
    async with open_http_transport(params()) as t:
        assert t.describe() == URL


# -- parameters ---------------------------------------------------------------------------------------


def test_credentials_in_the_url_are_refused() -> None:
    with pytest.raises(ConnectFailed, match="put credentials in a header") as info:
        HttpParams("https://user:hunter2@mcp.test/mcp")
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize("url", ["ftp://mcp.test/", "mcp.test/mcp", "http:///nohost"])
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(ConnectFailed):
        HttpParams(url)


def test_header_values_are_masked() -> None:
    p = HttpParams(URL, headers={"Authorization": "Bearer s3cret", "X-Api-Key": "k3y"})
    text = repr(p)
    assert "s3cret" not in text and "k3y" not in text
    assert "'Authorization': '***'" in text and "max_connections=10" in text
    assert p.headers["Authorization"] == "Bearer s3cret"


def test_reserved_headers_cannot_be_configured() -> None:
    with pytest.raises(ConnectFailed, match="set by the transport"):
        HttpParams(URL, headers={"accept": "text/html"})


def test_params_copy_the_headers() -> None:
    headers = {"A": "1"}
    p = HttpParams(URL, headers=headers)
    headers["A"] = "2"
    assert p.headers["A"] == "1"


@pytest.mark.parametrize("field", ["max_connections", "send_attempts", "resume_attempts", "max_event_bytes"])
def test_counts_must_be_positive(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        HttpParams(URL, **{field: 0})  # type: ignore[arg-type]


def test_describe_hides_the_query() -> None:
    async def go() -> str:
        async with open_http_transport(HttpParams(URL + "?token=abc")) as t:
            return t.describe()

    assert trio.run(go) == URL


def test_inf_is_not_a_valid_timeout() -> None:
    HttpParams(URL, resume_timeout=math.inf)  # infinite budgets are allowed
    with pytest.raises(ValueError):
        HttpParams(URL, connect_timeout=0)


async def test_get_stream_without_event_ids_keeps_reconnecting_while_it_delivers(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        n = len(server.of("GET"))
        if n <= 10:
            return sse(event({"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": n}}))
        return httpx2.Response(503)

    async with connect(handler, open_get_stream=True, get_stream_attempts=2) as (t, server):
        t.set_protocol_version("2025-11-25")
        got = await receive_all(t, 10)
        await nothing_more(t, 100)
    assert [e.params for e in got if isinstance(e, Notification)] == [{"n": n} for n in range(1, 11)]
    assert len(server.of("GET")) == 12  # ten that delivered, then two fruitless ones
    assert all("last-event-id" not in g.headers for g in server.of("GET"))


async def test_an_abandoned_call_has_its_stream_closed_quietly(autojump_clock: trio.abc.Clock) -> None:
    streams: list[ScriptedStream] = []

    async def handler(req: Seen) -> httpx2.Response:
        if req.rpc_method == "notifications/cancelled":
            return httpx2.Response(202)
        response = sse(event("", id=f"p{req.rpc_id}"), Hang())
        assert isinstance(response.stream, ScriptedStream)
        streams.append(response.stream)
        return response

    async with connect(handler) as (t, server):
        await t.send(Request(1, "tools/call"))
        await t.send(Request(2, "tools/call"))
        await trio.sleep(30)  # the session's call timeout
        await t.send(Notification("notifications/cancelled", {"requestId": 1, "reason": "timeout"}))
        await trio.testing.wait_all_tasks_blocked()
        assert not streams[0].closed  # the transport does not read MCP methods: the session decides
        t.abandon(1)
        t.abandon(99)  # never sent: nothing to let go
        await trio.testing.wait_all_tasks_blocked()
        assert streams[0].closed and not streams[1].closed
        await nothing_more(t)  # no RequestLost: the session already failed the call
    assert server.of("GET") == []


async def test_a_call_the_session_gives_up_on_frees_its_stream(autojump_clock: trio.abc.Clock) -> None:
    streams: list[ScriptedStream] = []

    async def handler(req: Seen) -> httpx2.Response:
        if req.rpc_method == "initialize":
            body = result(req.rpc_id)
            body["result"] = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}}
            return json_response(body, headers={"Mcp-Session-Id": "s"})
        if req.rpc_method == "tools/call":
            response = sse(event("", id="p"), Hang())
            assert isinstance(response.stream, ScriptedStream)
            streams.append(response.stream)
            return response
        if req.rpc_method == "server/discover":
            return httpx2.Response(400)  # a 2025 server: no session id
        return httpx2.Response(202)

    async with connect(handler) as (t, server), open_session(t, SessionOptions(server_log_level=None)) as session:
        with pytest.raises(CallTimeout):
            await session.call_tool("slow", {}, timeout=30)
        await trio.testing.wait_all_tasks_blocked()
        (cancelled,) = [s for s in server.of("POST") if s.rpc_method == "notifications/cancelled"]
        (call,) = server.posts_of(cancelled.body["params"]["requestId"])
        assert call.rpc_method == "tools/call" and streams[0].closed
    assert server.of("GET") == []


async def test_errors_do_not_show_the_session_id(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if req.rpc_method == "initialize":
            return json_response(result(0), headers={"mcp-session-id": "secret-session"})
        if req.rpc_id == 1:
            return sse(event("", id="a"), Hang())
        return httpx2.Response(404)

    async with connect(handler) as (t, _):
        await t.send(INIT)
        await next_event(t)
        await t.send(Request(1, "tools/call"))
        with pytest.raises(SessionExpired) as info:
            await t.send(Request(2, "tools/call"))
        lost = await next_event(t)
    assert isinstance(lost, RequestLost)
    assert "secret-session" not in str(info.value) and "secret-session" not in str(lost.error)


class _RenewingAuth:
    """An auth hook whose token ran out while a call ran: the first GET's 401 renews it."""

    def __init__(self) -> None:
        self.token = "t1"
        self.challenges: list[tuple[int, str | None]] = []

    def headers(self, method: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def nonce(self, dpop_nonce: str) -> None:
        pass

    async def challenged(
        self, status: int, www_authenticate: str | None, sent: Mapping[str, str], dpop_nonce: str | None = None
    ) -> bool:
        self.challenges.append((status, sent.get("Authorization")))
        self.token = "t2"
        return True


async def test_a_resumption_refused_for_an_expired_token_renews_it_and_resumes(autojump_clock: trio.abc.Clock) -> None:
    async def handler(req: Seen) -> httpx2.Response:
        if req.method == "POST":
            return sse(event("", id="a", retry=100))
        if req.headers.get("authorization") != "Bearer t2":
            return httpx2.Response(401, headers={"www-authenticate": 'Bearer error="invalid_token"'})
        return sse(event(result(1), id="b"))

    auth = _RenewingAuth()
    async with connect(handler, auth=auth) as (t, server):
        await t.send(Request(1, "tools/call"))
        assert await next_event(t) == Response(1, {"value": "ok"})
    assert auth.challenges == [(401, "Bearer t1")]
    assert [g.headers["authorization"] for g in server.of("GET")] == ["Bearer t1", "Bearer t2"]


TICK = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "tick"}}


def _get_stream_for(accepted: str | None) -> Handler:
    """A server whose GET stream brings ``TICK`` to a request with ``Authorization: accepted`` and answers 401
    to any other (to every one, with None)."""

    async def handler(req: Seen) -> httpx2.Response:
        if req.method == "GET":
            if accepted is None or req.headers.get("authorization") != accepted:
                return httpx2.Response(401, headers={"www-authenticate": 'Bearer error="invalid_token"'})
            return sse(event(TICK, id="g1"), Hang())
        if req.rpc_method == "initialize":
            return json_response(result(0), headers={"mcp-session-id": "S"})
        return httpx2.Response(202) if req.rpc_id is None else json_response(result(req.rpc_id))

    return handler


async def _handshake(t: HttpTransport) -> None:
    """Initialize: then the transport opens its GET stream."""
    await t.send(INIT)
    await next_event(t)
    t.set_protocol_version("2025-11-25")
    await t.send(Notification("notifications/initialized"))


async def test_the_get_stream_refused_for_an_expired_token_renews_it_and_opens_at_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The standalone GET stream hands a 401 to the auth hook, as a POST does, and is sent again at once with
    the renewed token (not after a reconnect's backoff, and not counted as one)."""
    auth = _RenewingAuth()
    handler = _get_stream_for("Bearer t2")
    async with connect(handler, open_get_stream=True, get_stream_attempts=1, auth=auth) as (t, server):
        await _handshake(t)
        with trio.fail_after(100):  # without the renewal the stream gives up and nothing comes
            assert await next_event(t) == Notification("notifications/message", TICK["params"], None)
        assert trio.current_time() == 0
    assert auth.challenges == [(401, "Bearer t1")]
    assert [g.headers["authorization"] for g in server.of("GET")] == ["Bearer t1", "Bearer t2"]


async def test_a_get_stream_the_hook_cannot_authorize_gives_up_without_taking_the_transport_down(
    autojump_clock: trio.abc.Clock,
) -> None:
    class Refusing(_RenewingAuth):
        async def challenged(
            self, status: int, www_authenticate: str | None, sent: Mapping[str, str], dpop_nonce: str | None = None
        ) -> bool:
            self.challenges.append((status, sent.get("Authorization")))
            raise ConnectFailed("no token for you")

    auth = Refusing()
    async with connect(_get_stream_for(None), open_get_stream=True, get_stream_attempts=2, auth=auth) as (t, server):
        await _handshake(t)
        await nothing_more(t, 100)
        await t.send(Request(1, "tools/call"))
        assert await next_event(t) == Response(1, {"value": "ok"})
    assert len(server.of("GET")) == len(auth.challenges) == 3  # the first GET and its 2 reconnects
