"""The session against scripted fake servers over memory transports, on trio's virtual clock."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
import trio
import trio.lowlevel

from runner._trio import single_error
from runner.errors import (
    CallTimeout,
    ConnectFailed,
    InvalidCall,
    JsonRpcError,
    MalformedMessage,
    NotDelivered,
    OutcomeUnknown,
    SessionExpired,
    TransportError,
    UnsupportedProtocolVersion,
)
from runner.protocol.jsonrpc import ErrorResponse, InvalidMessage, Notification, Request, Response, encode
from runner.protocol.mcp import LogMessage, Progress
from runner.session import WARN_FIRST, Session, SessionOptions, SessionStats, open_session
from runner.testing.memory import MemoryClientTransport, MemoryServerEnd, memory_transport_pair
from runner.transports.base import RequestLost
from tests.fakes.server import FakeCall, FakeServer, text_result


@pytest.fixture(autouse=True, params=["awaited", "queued"])
def _writes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs over a transport whose ``send`` is awaited (as HTTP's is), then over one whose writes are
    queued (as stdio's are: the session parks once per call and keeps its deadlines in one task)."""
    if request.param == "queued":
        monkeypatch.setitem(globals(), "memory_transport_pair", functools.partial(memory_transport_pair, queued=True))


@asynccontextmanager
async def connected(
    setup: Callable[[FakeServer], None] | None = None, **options: Any
) -> AsyncIterator[tuple[Session, FakeServer, MemoryClientTransport]]:
    with single_error():
        async with memory_transport_pair() as (client, end), trio.open_nursery() as nursery:
            server = FakeServer(end)
            if setup is not None:
                setup(server)
            nursery.start_soon(server.serve)
            async with open_session(client, SessionOptions(**options)) as session:
                yield session, server, client
            nursery.cancel_scope.cancel()


async def echo(call: FakeCall) -> dict[str, Any]:
    return text_result(str(call.arguments.get("text")))


async def test_handshake_records_server_and_sends_initialized() -> None:
    async with connected() as (session, server, client):
        assert session.protocol_version == "2025-11-25"
        assert session.server_info == {"name": "fake", "version": "1"}
        assert session.instructions == "be nice"
        assert client.protocol_version == "2025-11-25"
        # auto: the 2026-07-28 probe first; the fake answers it -32601, an older server: the handshake follows
        probe, init = server.received[:2]
        assert isinstance(probe, Request) and probe.method == "server/discover"
        assert isinstance(init, Request) and init.method == "initialize"
        assert init.params is not None and init.params["protocolVersion"] == "2025-11-25"
        assert init.params["capabilities"] == {"tasks": {}}
        await trio.testing.wait_all_tasks_blocked()
        assert any(isinstance(m, Notification) and m.method == "notifications/initialized" for m in server.received)


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_accepts_every_supported_version(version: str) -> None:
    def setup(s: FakeServer) -> None:
        s.protocol_version = version

    async with connected(setup) as (session, _, _):
        assert session.protocol_version == version


async def test_unsupported_version_names_both() -> None:
    def setup(s: FakeServer) -> None:
        s.protocol_version = "2099-01-01"

    with pytest.raises(UnsupportedProtocolVersion) as info:
        async with connected(setup):
            pass
    assert "2099-01-01" in str(info.value) and "2025-11-25" in str(info.value)


async def test_missing_tools_capability_is_a_warning() -> None:
    warnings: list[str] = []

    def setup(s: FakeServer) -> None:
        s.capabilities = {}

    async with connected(setup, on_warning=warnings.append) as (session, _, _):
        assert session.capabilities == {}
    assert any("'tools' capability" in w for w in warnings)


async def test_set_level_sent_only_when_logging_declared() -> None:
    def setup(s: FakeServer) -> None:
        s.capabilities = {"tools": {}, "logging": {}}

    async with connected(setup, server_log_level="warning") as (_, server, _):
        levels = [m.params for m in server.received if isinstance(m, Request) and m.method == "logging/setLevel"]
        assert levels == [{"level": "warning"}]
    async with connected() as (_, server, _):
        assert not [m for m in server.received if isinstance(m, Request) and m.method == "logging/setLevel"]


async def test_list_tools_pages_and_caches() -> None:
    def setup(s: FakeServer) -> None:
        s.page_size = 2
        for i in range(5):
            s.tools[f"t{i}"] = echo

    async with connected(setup) as (session, server, _client):
        assert session.listed_tools is None
        tools = await session.list_tools()
        assert [t.name for t in tools] == ["t0", "t1", "t2", "t3", "t4"]
        assert session.listed_tools is tools
        lists = [m for m in server.received if isinstance(m, Request) and m.method == "tools/list"]
        assert len(lists) == 3
        await session.list_tools()
        assert len([m for m in server.received if isinstance(m, Request) and m.method == "tools/list"]) == 3
        # list_changed drops the cache
        await server.end.send(Notification("notifications/tools/list_changed"))
        await trio.testing.wait_all_tasks_blocked()
        assert session.listed_tools is None
        await session.list_tools()
        assert len([m for m in server.received if isinstance(m, Request) and m.method == "tools/list"]) == 6


async def test_list_tools_stops_on_repeated_cursor(autojump_clock: trio.abc.Clock) -> None:
    # Virtual time: this server ignores the ``server/discover`` probe, which waits out PROBE_TIMEOUT (10 s).
    async with memory_transport_pair() as (client, end), trio.open_nursery() as nursery:
        server = FakeServer(end)

        async def serve() -> None:
            while True:
                msg = await end.receive()
                if isinstance(msg, Request):
                    if msg.method == "initialize":
                        await end.send(Response(msg.id, {"protocolVersion": "2025-11-25", "capabilities": {}}))
                    elif msg.method == "tools/list":
                        await end.send(Response(msg.id, {"tools": [], "nextCursor": "same"}))

        del server
        nursery.start_soon(serve)
        async with open_session(client) as session:
            with pytest.raises(MalformedMessage, match="repeated cursor"):
                await session.list_tools()
        nursery.cancel_scope.cancel()


async def test_many_concurrent_calls_matched_by_id(autojump_clock: trio.abc.Clock) -> None:
    async def slow_echo(call: FakeCall) -> dict[str, Any]:
        # answer in reverse-ish order
        await trio.sleep(1000 - int(call.arguments["text"]))
        return text_result(str(call.arguments["text"]))

    def setup(s: FakeServer) -> None:
        s.tools["echo"] = slow_echo

    results: dict[int, str] = {}
    async with connected(setup) as (session, server, _):

        async def one(i: int) -> None:
            r = await session.call_tool("echo", {"text": i})
            results[i] = r.text

        async with trio.open_nursery() as nursery:
            for i in range(100):
                nursery.start_soon(one, i)
        ids = [c.id for c in server.calls]
        assert len(set(ids)) == 100
    assert results == {i: str(i) for i in range(100)}


async def test_progress_routed_to_the_owning_call(autojump_clock: trio.abc.Clock) -> None:
    async def work(call: FakeCall) -> dict[str, Any]:
        n = int(call.arguments["n"])
        for i in range(n):
            await call.progress(i + 1, n, f"{call.arguments['name']} {i + 1}")
            await trio.sleep(1)
        return text_result("ok")

    def setup(s: FakeServer) -> None:
        s.tools["work"] = work

    seen: dict[str, list[Progress]] = {"a": [], "b": []}
    async with connected(setup) as (session, server, _), trio.open_nursery() as nursery:
        nursery.start_soon(lambda: session.call_tool("work", {"n": 3, "name": "a"}, on_progress=seen["a"].append))
        nursery.start_soon(lambda: session.call_tool("work", {"n": 5, "name": "b"}, on_progress=seen["b"].append))
    assert [p.message for p in seen["a"]] == ["a 1", "a 2", "a 3"]
    assert [p.message for p in seen["b"]] == [f"b {i}" for i in range(1, 6)]
    assert seen["b"][-1].total == 5
    tokens = [c.params["_meta"]["progressToken"] for c in server.calls if c.params]
    assert len(set(tokens)) == 2


async def test_log_notifications_reach_the_session_handler() -> None:
    logs: list[tuple[LogMessage, Any]] = []

    async def chatty(call: FakeCall) -> dict[str, Any]:
        await call.log("warning", {"msg": "careful"})
        return text_result("ok")

    def setup(s: FakeServer) -> None:
        s.tools["chatty"] = chatty

    async with connected(setup, on_log=lambda m, rid: logs.append((m, rid))) as (session, _, _):
        await session.call_tool("chatty", {})
    assert logs[0][0].level == "warning" and logs[0][0].data == {"msg": "careful"}


async def test_tool_error_and_protocol_error_are_kept_apart() -> None:
    async def broken(call: FakeCall) -> dict[str, Any]:
        return text_result("it broke", is_error=True)

    def setup(s: FakeServer) -> None:
        s.tools["broken"] = broken

    async with connected(setup) as (session, _, _):
        result = await session.call_tool("broken", {})
        assert result.is_error and result.text == "it broke"
        with pytest.raises(JsonRpcError) as info:
            await session.call_tool("missing", {})
        assert info.value.code == -32602 and "unknown tool" in info.value.message


async def test_idle_timeout_reset_by_progress_then_hard_cap(autojump_clock: trio.abc.Clock) -> None:
    async def forever(call: FakeCall) -> None:
        i = 0
        while True:
            i += 1
            await call.progress(i)
            await trio.sleep(4)

    def setup(s: FakeServer) -> None:
        s.tools["forever"] = forever

    async with connected(setup) as (session, server, _):
        start = trio.current_time()
        with pytest.raises(CallTimeout, match="30 s timeout"):
            await session.call_tool("forever", {}, timeout=30, idle_timeout=5)
        assert trio.current_time() - start == pytest.approx(30)
        await trio.testing.wait_all_tasks_blocked()
        assert server.cancelled == [server.calls[0].id]


async def test_idle_timeout_without_progress(autojump_clock: trio.abc.Clock) -> None:
    async def silent(call: FakeCall) -> None:
        await trio.sleep_forever()

    def setup(s: FakeServer) -> None:
        s.tools["silent"] = silent

    async with connected(setup) as (session, server, _):
        start = trio.current_time()
        with pytest.raises(CallTimeout, match="no progress for 7 s") as info:
            await session.call_tool("silent", {}, timeout=100, idle_timeout=7)
        assert isinstance(info.value, OutcomeUnknown)
        assert trio.current_time() - start == pytest.approx(7)
        await trio.testing.wait_all_tasks_blocked()
        assert server.cancelled == [server.calls[0].id]


async def test_late_response_after_timeout_is_ignored(autojump_clock: trio.abc.Clock) -> None:
    async def late(call: FakeCall) -> dict[str, Any]:
        await trio.sleep(10)
        return text_result("late")

    def setup(s: FakeServer) -> None:
        s.tools["late"] = late
        s.tools["echo"] = echo

    warnings: list[str] = []
    async with connected(setup, on_warning=warnings.append) as (session, _, _):
        with pytest.raises(CallTimeout):
            await session.call_tool("late", {}, timeout=1)
        await trio.sleep(20)
        assert session.stats == SessionStats(late_responses=1)
        assert warnings == []  # expected after a timeout: counted, not shown
        assert (await session.call_tool("echo", {"text": "still fine"})).text == "still fine"


async def test_trio_cancellation_sends_cancelled(autojump_clock: trio.abc.Clock) -> None:
    async def silent(call: FakeCall) -> None:
        await trio.sleep_forever()

    def setup(s: FakeServer) -> None:
        s.tools["silent"] = silent

    async with connected(setup) as (session, server, client):
        with trio.move_on_after(3):
            await session.call_tool("silent", {})
        await trio.testing.wait_all_tasks_blocked()
        assert server.cancelled == [server.calls[0].id]
        assert client.abandoned == [server.calls[0].id]


async def test_a_call_given_up_is_abandoned_at_the_transport_after_its_cancellation(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def silent(call: FakeCall) -> None:
        await trio.sleep_forever()

    def setup(s: FakeServer) -> None:
        s.tools["silent"] = silent

    async with connected(setup) as (session, server, client):
        # What the transport had been asked to send when it was told a response is no longer wanted.
        sent_when_abandoned: list[list[Any]] = []
        record = client.abandon

        def abandon(rid: Any) -> None:
            sent_when_abandoned.append([m.params for m in client.sent if isinstance(m, Notification)])
            record(rid)

        client.abandon = abandon  # type: ignore[method-assign]
        with pytest.raises(CallTimeout):
            await session.call_tool("silent", {}, timeout=5)
        with pytest.raises(CallTimeout):
            await session.call_tool("silent", {}, idle_timeout=5)
        first, second = (c.id for c in server.calls)
        assert client.abandoned == [first, second]
        assert sent_when_abandoned[0][-1] == {"requestId": first, "reason": "timeout"}
        assert sent_when_abandoned[1][-1] == {"requestId": second, "reason": "timeout"}


async def test_transport_death_fails_every_pending_call_as_outcome_unknown() -> None:
    async def silent(call: FakeCall) -> None:
        await trio.sleep_forever()

    def setup(s: FakeServer) -> None:
        s.tools["silent"] = silent

    errors: list[BaseException] = []
    async with connected(setup) as (session, server, _):

        async def one() -> None:
            try:
                await session.call_tool("silent", {})
            except TransportError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(one)
            await trio.testing.wait_all_tasks_blocked()
            server.end.break_connection(TransportError("server exited with code 1", stderr="Traceback: boom"))
        assert len(errors) == 10
        assert all(isinstance(e, OutcomeUnknown) and e.written for e in errors)
        assert "boom" in str(errors[0])
        with pytest.raises(NotDelivered):
            await session.call_tool("silent", {})


async def test_request_lost_fails_only_that_call() -> None:
    async def lost(call: FakeCall) -> None:
        await call.server.end.send(RequestLost(call.request.id, OutcomeUnknown("stream could not be resumed")))

    def setup(s: FakeServer) -> None:
        s.tools["lost"] = lost
        s.tools["echo"] = echo

    async with connected(setup) as (session, _, _):
        with pytest.raises(OutcomeUnknown, match="resumed"):
            await session.call_tool("lost", {})
        assert (await session.call_tool("echo", {"text": "x"})).text == "x"


async def test_invalid_response_with_id_fails_that_call() -> None:
    async def garbage(call: FakeCall) -> None:
        await call.server.end.send(InvalidMessage(b'{"id":2,"jsonrpc":"2.0"}', "no result", call.request.id))

    def setup(s: FakeServer) -> None:
        s.tools["garbage"] = garbage

    warnings: list[str] = []
    async with connected(setup, on_warning=warnings.append) as (session, server, _):
        with pytest.raises(MalformedMessage, match="no result"):
            await session.call_tool("garbage", {})
        await server.end.send(InvalidMessage(b"hello", "not JSON"))
        await trio.testing.wait_all_tasks_blocked()
        assert session.stats.invalid_lines == 2
        assert warnings == ['server: ignored a message that is not JSON-RPC (not JSON): "hello"']


async def test_malformed_result_is_a_protocol_error() -> None:
    async def bad(call: FakeCall) -> dict[str, Any]:
        return {"content": "not a list"}

    def setup(s: FakeServer) -> None:
        s.tools["bad"] = bad

    async with connected(setup) as (session, _, _):
        with pytest.raises(MalformedMessage, match="content"):
            await session.call_tool("bad", {})


async def test_server_requests_answered() -> None:
    async with connected() as (_session, server, _):
        await server.end.send(Request("p1", "ping"))
        await server.end.send(Request(7, "sampling/createMessage", {}))
        await server.end.send(Request(8, "roots/list"))
        await trio.testing.wait_all_tasks_blocked()
        replies = [m for m in server.received if isinstance(m, Response | ErrorResponse)]
        assert Response("p1", {}) in replies
        codes = {m.id: m.code for m in replies if isinstance(m, ErrorResponse)}
        assert codes == {7: -32601, 8: -32601}


async def test_string_and_int_ids_are_distinct() -> None:
    async def silent(call: FakeCall) -> None:
        await trio.sleep_forever()

    def setup(s: FakeServer) -> None:
        s.tools["silent"] = silent

    warnings: list[str] = []
    async with connected(setup, name="docs", on_warning=warnings.append) as (session, server, _):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: session.call_tool("silent", {}))
            await trio.testing.wait_all_tasks_blocked()
            rid = server.calls[0].id
            assert isinstance(rid, int)
            await server.end.send(Response(str(rid), {"content": []}))  # the string form is not our id
            await trio.testing.wait_all_tasks_blocked()
            assert session.stats == SessionStats(unmatched_responses=1)
            await server.end.send(Response(rid, {"content": []}))
        assert warnings == [
            f'docs: ignored a response with id "{rid}", which matches no request we sent (ids are matched '
            f'exactly: we sent the number {rid}, not the string "{rid}"): '
            f'{{"jsonrpc":"2.0","id":"{rid}","result":{{"content":[]}}}}'
        ]


async def test_server_dies_during_initialize_is_connect_failed() -> None:
    async with memory_transport_pair() as (client, end), trio.open_nursery() as nursery:

        async def die() -> None:
            await end.receive()
            end.break_connection(TransportError("server exited with code 3", stderr="ImportError: nope"))

        nursery.start_soon(die)
        with pytest.raises(ConnectFailed) as info:
            async with open_session(client, SessionOptions(name="docs")):
                pass
        # The server's name is left to whoever shows the error ("server docs: could not initialize: ..."),
        # and its stderr comes on lines of its own.
        assert str(info.value) == (
            "could not initialize: server exited with code 3\n  server stderr (last lines):\n    ImportError: nope"
        )
        assert info.value.server == "docs"


async def test_server_never_answers_initialize(autojump_clock: trio.abc.Clock) -> None:
    async with memory_transport_pair() as (client, end):
        with pytest.raises(ConnectFailed) as info:
            async with open_session(client, SessionOptions(initialize_timeout=10, protocol="2025-11-25")):
                pass
        assert str(info.value) == "could not initialize: no answer within 10 s"
        assert trio.current_time() == 10
        # initialize is never cancelled
        sent = [m for m in client.sent if isinstance(m, Notification)]
        assert sent == []
        del end


async def test_session_expiry_reinitializes_and_resends() -> None:
    async with memory_transport_pair() as (client, end), trio.open_nursery() as nursery:
        server = FakeServer(end)
        server.tools["echo"] = echo
        nursery.start_soon(server.serve)
        async with open_session(client) as session:
            original_send = client.send
            expired = [True]

            async def send_once_expired(message: Any) -> None:
                if isinstance(message, Request) and message.method == "tools/call" and expired:
                    expired.clear()
                    raise SessionExpired("404 on POST")
                await original_send(message)

            client.send = send_once_expired  # type: ignore[method-assign]
            result = await session.call_tool("echo", {"text": "again"})
            assert result.text == "again"
            inits = [m for m in server.received if isinstance(m, Request) and m.method == "initialize"]
            assert len(inits) == 2
            assert len(server.calls) == 1
        nursery.cancel_scope.cancel()


async def test_a_journaled_call_refused_for_an_expired_session_is_handed_back_after_renewal() -> None:
    # With before_send (the write-ahead journal), the caller records how the attempt ended and sends again
    # itself: the session renews the session and raises, it never sends the call a second time on its own.
    async with memory_transport_pair() as (client, end), trio.open_nursery() as nursery:
        server = FakeServer(end)
        server.tools["echo"] = echo
        nursery.start_soon(server.serve)
        async with open_session(client) as session:
            original_send = client.send
            expired = [True]

            async def send_once_expired(message: Any) -> None:
                if isinstance(message, Request) and message.method == "tools/call" and expired:
                    expired.clear()
                    raise SessionExpired("404 on POST")
                await original_send(message)

            client.send = send_once_expired  # type: ignore[method-assign]
            journaled: list[Any] = []

            async def before_send(rid: Any, token: Any) -> None:
                journaled.append(rid)

            with pytest.raises(SessionExpired):
                await session.call_tool("echo", {"text": "x"}, before_send=before_send)
            assert len(journaled) == 1 and server.calls == []
            inits = [m for m in server.received if isinstance(m, Request) and m.method == "initialize"]
            assert len(inits) == 2  # renewed: the next call goes out on the new session
            result = await session.call_tool("echo", {"text": "again"}, before_send=before_send)
            assert result.text == "again" and len(server.calls) == 1
        nursery.cancel_scope.cancel()


async def test_an_expiry_during_the_renewal_handshake_fails_cleanly() -> None:
    async with memory_transport_pair() as (client, end), trio.open_nursery() as nursery:
        server = FakeServer(end, capabilities={"tools": {}, "logging": {}})
        server.tools["echo"] = echo
        nursery.start_soon(server.serve)
        async with open_session(client, SessionOptions(server_log_level="info")) as session:
            original_send = client.send
            script = ["tools/call", "logging/setLevel"]  # the call finds the session gone, then so does renewal

            async def send(message: Any) -> None:
                if isinstance(message, Request) and script and message.method == script[0]:
                    script.pop(0)
                    raise SessionExpired("404 on POST")
                await original_send(message)

            client.send = send  # type: ignore[method-assign]
            with pytest.raises(NotDelivered, match="a new one could not be started"):
                await session.call_tool("echo", {"text": "x"})
            assert server.calls == []
            result = await session.call_tool("echo", {"text": "later"})  # the session is usable again
            assert result.text == "later"
        nursery.cancel_scope.cancel()


async def test_before_send_runs_before_the_request_is_written() -> None:
    order: list[str] = []

    async def record(call: FakeCall) -> dict[str, Any]:
        order.append(f"server saw {call.request.id}")
        return text_result("ok")

    def setup(s: FakeServer) -> None:
        s.tools["record"] = record

    async def before_send(rid: Any, token: Any) -> None:
        order.append(f"journal {rid} token {token}")
        await trio.lowlevel.checkpoint()

    async with connected(setup) as (session, server, _):
        await session.call_tool("record", {}, before_send=before_send)
    rid = server.calls[0].id
    assert order == [f"journal {rid} token {rid}", f"server saw {rid}"]


@pytest.mark.parametrize("value", [float("nan"), 10**5000, object()], ids=["nan", "long-int", "object"])
async def test_arguments_json_cannot_carry_fail_before_the_dispatch_hook(value: Any) -> None:
    """A journaled call (``before_send``) whose arguments cannot be written fails ``InvalidCall`` before its
    dispatch is journaled, and nothing is sent; a call that can be written goes out as the bytes written for
    that check (one encode)."""
    journaled: list[Any] = []

    async def before_send(rid: Any, token: Any) -> None:
        journaled.append(rid)

    async with connected(lambda s: s.tools.update(echo=echo)) as (session, _server, client):
        with pytest.raises(InvalidCall, match="echo: the arguments cannot be sent as JSON"):
            await session.call_tool("echo", {"text": "x", "v": value}, before_send=before_send)
        assert journaled == []
        assert not [m for m in client.sent if isinstance(m, Request) and m.method == "tools/call"]
        result = await session.call_tool("echo", {"text": "fine"}, before_send=before_send)
        assert result.text == "fine"
    sent = [m for m in client.sent if isinstance(m, Request) and m.method == "tools/call"]
    assert [m.id for m in sent] == journaled
    assert sent[0].wire is not None and encode(sent[0]) == sent[0].wire
    assert json.loads(sent[0].wire)["params"]["arguments"] == {"text": "fine"}


async def test_a_write_that_completes_after_the_connection_died_is_in_doubt() -> None:
    """The reader fails every pending call when the connection dies; a call whose write was still under way
    must not be told "not delivered" if that write then completes."""
    async with connected() as (session, server, client):
        release = trio.Event()
        original_send = client.send

        async def slow_send(message: Any) -> None:
            if isinstance(message, Request) and message.method == "tools/call":
                await release.wait()
                client.sent.append(message)  # the write completed: the server has the request
                return
            await original_send(message)

        client.send = slow_send  # type: ignore[method-assign]
        errors: list[BaseException] = []

        async def call() -> None:
            try:
                await session.call_tool("anything", {})
            except TransportError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.testing.wait_all_tasks_blocked()
            server.end.break_connection(TransportError("server died"))
            await trio.testing.wait_all_tasks_blocked()
            release.set()
        assert len(errors) == 1 and isinstance(errors[0], OutcomeUnknown), errors


async def test_the_deadline_covers_a_send_that_waits_for_the_server(autojump_clock: trio.abc.Clock) -> None:
    """Over HTTP, send() returns only when the server sends headers (with JSON responses: when the tool is
    done), so the call's timeout must already run while sending."""
    async with connected() as (session, _server, client):
        original_send = client.send

        async def stuck_send(message: Any) -> None:
            if isinstance(message, Request) and message.method == "tools/call":
                await trio.sleep_forever()
            await original_send(message)

        client.send = stuck_send  # type: ignore[method-assign]
        start = trio.current_time()
        with pytest.raises(CallTimeout):
            await session.call_tool("slow", {}, timeout=10)
        assert trio.current_time() - start == pytest.approx(10)


def stdio_like_pair() -> AbstractAsyncContextManager[tuple[MemoryClientTransport, MemoryServerEnd]]:
    """A memory pair whose client describes itself as a stdio server does."""
    return memory_transport_pair("stdio: fake-server --port 3000")


async def test_initialize_timeout_quotes_what_the_server_wrote_instead(autojump_clock: trio.abc.Clock) -> None:
    async with stdio_like_pair() as (client, end):

        async def logs_to_stdout() -> None:
            await end.receive()  # initialize: never answered
            await end.send(InvalidMessage(b"Listening on port 3000", "not JSON: Expecting value"))
            await end.send(InvalidMessage(b"Ready.", "not JSON: Expecting value"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(logs_to_stdout)
            with pytest.raises(ConnectFailed) as info:
                async with open_session(client, SessionOptions(name="docs", initialize_timeout=30)):
                    pass  # pragma: no cover
    assert str(info.value) == (
        'could not initialize: no answer within 30 s; it wrote text that is not JSON-RPC on stdout: "Listening on '
        'port 3000" (an MCP server must write only protocol messages on stdout; logs go to stderr)'
    )


async def test_a_server_that_logs_to_stdout_and_dies_is_told_so() -> None:
    async with stdio_like_pair() as (client, end):

        async def dies() -> None:
            await end.receive()
            await end.send(InvalidMessage(b"\x1b[32mINFO\x1b[0m starting\r", "not JSON: Expecting value"))
            end.break_connection(TransportError("server exited with code 1", stderr="Error: EADDRINUSE\n"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(dies)
            with pytest.raises(ConnectFailed) as info:
                async with open_session(client, SessionOptions(name="docs")):
                    pass  # pragma: no cover
    assert str(info.value).splitlines() == [
        "could not initialize: server exited with code 1; it wrote text that is not JSON-RPC on stdout: "
        '"\\x1b[32mINFO\\x1b[0m starting\\r" (an MCP server must write only protocol messages on stdout; logs go '
        "to stderr)",
        "  server stderr (last lines):",
        "    Error: EADDRINUSE",
    ]


async def test_text_that_is_not_json_rpc_over_another_transport_is_quoted_without_the_stdout_advice() -> None:
    async with memory_transport_pair() as (client, end):

        async def dies() -> None:
            await end.receive()
            await end.send(InvalidMessage(b"<html>Bad Gateway</html>", "not JSON: Expecting value"))
            end.break_connection(TransportError("the stream ended"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(dies)
            with pytest.raises(ConnectFailed) as info:
                async with open_session(client):
                    pass  # pragma: no cover
    assert str(info.value) == (
        'could not initialize: the stream ended; it sent something that is not JSON-RPC: "<html>Bad Gateway</html>"'
    )


async def test_lines_that_are_not_json_rpc_are_shown_a_few_times_then_counted() -> None:
    warnings: list[str] = []
    async with stdio_like_pair() as (client, end), trio.open_nursery() as nursery:
        server = FakeServer(end)
        server.tools["echo"] = echo
        nursery.start_soon(server.serve)
        async with open_session(client, SessionOptions(name="docs", on_warning=warnings.append)) as session:
            await end.send(InvalidMessage(b"plain text", "not JSON: Expecting value: line 1 column 1 (char 0)"))
            await end.send(InvalidMessage(b'{"jsonrpc":"1.0","method":"x"}', '"jsonrpc" must be "2.0", got \'1.0\''))
            await end.send(InvalidMessage(b"x" * 1000, "not JSON: Expecting value"))
            for n in range(20):
                await end.send(InvalidMessage(f"more {n}".encode(), "not JSON: Expecting value"))
            assert (await session.call_tool("echo", {"text": "still fine"})).text == "still fine"
            assert session.stats == SessionStats(invalid_lines=23)
        nursery.cancel_scope.cancel()
    assert warnings == [
        'docs: ignored a line on stdout that is not JSON-RPC (not JSON): "plain text"',
        'docs: ignored a line on stdout that is not JSON-RPC ("jsonrpc" must be "2.0", got \'1.0\'): '
        '"{"jsonrpc":"1.0","method":"x"}"',
        f'docs: ignored a line on stdout that is not JSON-RPC (not JSON): "{"x" * 160}…"',
        "docs: more output that is not JSON-RPC; further lines are only counted",
    ]
    assert WARN_FIRST == 3


async def test_responses_that_match_no_request_are_shown_a_few_times_then_counted(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def late(call: FakeCall) -> dict[str, Any]:
        await trio.sleep(10)
        return text_result("late")

    def setup(s: FakeServer) -> None:
        s.tools["late"] = late

    warnings: list[str] = []
    async with connected(setup, name="docs", on_warning=warnings.append) as (session, server, _):
        with pytest.raises(CallTimeout):
            await session.call_tool("late", {}, timeout=1)
        await trio.sleep(20)  # its answer comes late: expected, not unmatched
        await server.end.send(Response(999, {}))  # an id we never issued
        await server.end.send(ErrorResponse(None, -32700, "Parse error"))
        await server.end.send(ErrorResponse("abc", -32603, "boom"))
        await server.end.send(Response(0, {}))
        await server.end.send(Response(-2, {}))
        await trio.testing.wait_all_tasks_blocked()
        assert session.stats == SessionStats(unmatched_responses=5, late_responses=1)
    assert warnings == [
        "docs: ignored a response with id 999, which matches no request we sent: "
        '{"jsonrpc":"2.0","id":999,"result":{}}',
        "docs: ignored an error response with a null id: "
        '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}',
        'docs: ignored a response with id "abc", which matches no request we sent: '
        '{"jsonrpc":"2.0","id":"abc","error":{"code":-32603,"message":"boom"}}',
        "docs: more responses that match no request; further ones are only counted",
    ]


async def test_a_call_whose_session_closes_while_its_dispatch_is_journaled_is_not_sent(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The session closes (its owner leaves ``open_session``) while a journaled call waits for its dispatch's
    fsync (``before_send``): the call ends at once, surely not sent, and nothing reaches the server. (Over a
    queued transport it used to be written with nobody left to read its answer or keep its deadline.)"""
    fsync, inside, ended = trio.Event(), trio.Event(), trio.Event()

    async def before_send(rid: Any, token: Any) -> None:
        inside.set()
        await fsync.wait()

    with single_error():
        async with memory_transport_pair() as (client, end), trio.open_nursery() as nursery:
            server = FakeServer(end)
            server.tools["echo"] = echo
            nursery.start_soon(server.serve)

            async def owner(task_status: trio.TaskStatus[Session] = trio.TASK_STATUS_IGNORED) -> None:
                async with open_session(client, SessionOptions()) as session:
                    task_status.started(session)
                    await inside.wait()
                fsync.set()

            session: Session = await nursery.start(owner)

            async def call() -> None:
                with pytest.raises(NotDelivered, match=r"connection is closed: .*session closed"):
                    await session.call_tool("echo", {"text": "x"}, timeout=10, before_send=before_send)
                ended.set()

            with trio.fail_after(5):  # before the call's own timeout: it ends at once
                nursery.start_soon(call)
                await ended.wait()
            await trio.testing.wait_all_tasks_blocked()
            assert not [m for m in server.received if isinstance(m, Request) and m.method == "tools/call"]
            nursery.cancel_scope.cancel()
