"""The state one Streamable HTTP connection shares between its POST side and its readers
(:mod:`runner.transports.http.connection`), driven directly: no HTTP, no tasks."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from runner.errors import ConnectFailed, OutcomeUnknown, TransportError
from runner.protocol.jsonrpc import InvalidMessage, Notification, Response
from runner.protocol.sse import SSEEvent
from runner.transports.base import RequestLost, TransportEvent
from runner.transports.http.connection import Connection, Stream
from runner.transports.http.params import EXTRA_CONNECTIONS, HttpParams

NAME = "http://mcp.test/mcp"


def connection() -> Connection:
    return Connection({"Authorization": "Bearer t"}, NAME)


def opened(conn: Connection, rid: int, session_id: str | None = None) -> Stream:
    """A request whose POST was answered: a reader owns its stream."""
    stream = conn.register(rid)
    stream.session_id = session_id
    stream.open = True
    return stream


async def drain(conn: Connection) -> list[TransportEvent]:
    conn.close()
    out: list[TransportEvent] = []
    with pytest.raises(TransportError, match="closed"):
        while True:
            out.append(await conn.receive())
    return out


def test_headers_carry_the_session_except_on_initialize() -> None:
    conn = connection()
    assert conn.headers("GET", "text/event-stream") == {"Authorization": "Bearer t", "Accept": "text/event-stream"}
    conn.capture_session("s-1")
    conn.set_protocol_version("2025-11-25")
    assert conn.headers("GET", "a", last_event_id="e7") == {
        "Authorization": "Bearer t",
        "Accept": "a",
        "Mcp-Session-Id": "s-1",
        "MCP-Protocol-Version": "2025-11-25",
        "Last-Event-ID": "e7",
    }
    assert "Mcp-Session-Id" not in conn.headers("POST", "a", initialize=True)


@pytest.mark.parametrize("value", ["", "has space", "naïve", "tab\t"])
def test_a_session_id_must_be_visible_ascii(value: str) -> None:
    conn = connection()
    with pytest.raises(ConnectFailed, match="invalid Mcp-Session-Id"):
        conn.capture_session(value)
    assert conn.session_id is None


async def test_expiry_fails_the_open_calls_of_that_session_only() -> None:
    conn = connection()
    conn.capture_session("old")
    in_old = opened(conn, 1, "old")
    in_new = opened(conn, 2, "new")
    posting = conn.register(3)  # its POST still awaits a status: that POST decides
    posting.session_id = "old"
    get = conn.open_get_stream()
    assert get is not None
    conn.expire("old")
    assert conn.session_id is None and conn.expired
    assert in_old.scope.cancel_called and in_old.finished
    assert not in_new.finished and not posting.finished
    assert get.scope.cancel_called
    (lost,) = await drain(conn)
    assert isinstance(lost, RequestLost) and lost.request_id == 1 and isinstance(lost.error, OutcomeUnknown)
    conn.capture_session("fresh")
    assert not conn.expired and conn.session_id == "fresh"


async def test_expiry_of_a_session_no_longer_current_keeps_the_current_one() -> None:
    conn = connection()
    conn.capture_session("current")
    conn.expire("earlier")
    assert conn.session_id == "current" and not conn.expired
    assert await drain(conn) == []


async def test_a_response_ends_its_call_whichever_stream_carries_it() -> None:
    conn = connection()
    first, second = opened(conn, 1), opened(conn, 2)
    conn.dispatch(Response(1, {}), second)
    assert first.finished and first.scope.cancel_called  # its reader is stopped
    assert not second.finished and not second.scope.cancel_called
    conn.dispatch(Response(1, {}), second)  # a replay: dropped
    conn.dispatch(Response(9, {}), second)  # never issued here: handed on, the session counts it
    conn.dispatch(Response("1", {}), second)  # a string is another id
    assert await drain(conn) == [Response(1, {}), Response(9, {}), Response("1", {})]


async def test_notifications_name_the_request_of_their_stream() -> None:
    conn = connection()
    stream = opened(conn, 4)
    get = conn.open_get_stream()
    assert get is not None
    conn.dispatch(Notification("notifications/progress", {"progress": 1}), stream)
    conn.dispatch(Notification("notifications/message", {}), get)
    got = await drain(conn)
    assert [e.related_request_id for e in got if isinstance(e, Notification)] == [4, None]
    assert stream.delivered == 1 and get.delivered == 1


async def test_an_invalid_response_to_a_call_ends_its_stream() -> None:
    conn = connection()
    stream = opened(conn, 5)
    conn.dispatch(InvalidMessage(b"{}", "no result", request_id=5), stream)
    assert stream.finished
    (invalid,) = await drain(conn)
    assert isinstance(invalid, InvalidMessage)


async def test_events_are_delivered_once_per_session_and_move_the_cursor() -> None:
    conn = connection()
    conn.capture_session("s")
    stream = opened(conn, 1, "s")
    progress = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}'
    assert conn.on_event(SSEEvent("", id="p", retry=250), stream)  # priming: an id, no message
    assert stream.last_event_id == "p" and stream.retry_ms == 250
    assert conn.on_event(SSEEvent(progress, id="e1"), stream)
    assert not conn.on_event(SSEEvent(progress, id="e1"), stream)  # replayed
    assert not conn.on_event(SSEEvent(progress), stream)  # no id: delivered, no progress of the cursor
    assert stream.last_event_id == "e1"
    conn.capture_session("s2")  # a new session: ids start afresh
    assert conn.on_event(SSEEvent("", id="e1"), stream)
    assert len(await drain(conn)) == 2


async def test_abandon_stops_an_open_stream_quietly() -> None:
    conn = connection()
    stream = opened(conn, 1)
    posting = conn.register(2)
    conn.abandon(1)
    conn.abandon(2)  # its POST is under way: cancelling that is the caller's
    conn.abandon(3)  # unknown: nothing
    assert stream.finished and stream.scope.cancel_called and not posting.finished
    conn.lose(stream, OutcomeUnknown("too late"))  # already over: nothing reported
    assert await drain(conn) == []


def test_one_request_id_in_flight_at_a_time() -> None:
    conn = connection()
    stream = conn.register(1)
    with pytest.raises(ValueError, match="already in flight"):
        conn.register(1)
    conn.forget(stream)
    conn.register(1)


def test_one_get_stream_per_session() -> None:
    conn = connection()
    conn.capture_session("a")
    first = conn.open_get_stream()
    assert first is not None and first.session_id == "a"
    assert conn.open_get_stream() is None
    conn.capture_session("b")
    second = conn.open_get_stream()
    assert second is not None and first.scope.cancel_called
    conn.close_get_stream(first)  # the old reader ends late: the current one stays
    assert conn.open_get_stream() is None
    conn.close_get_stream(second)
    assert conn.open_get_stream() is not None


async def test_events_after_close_are_dropped() -> None:
    conn = connection()
    conn.close()
    conn.emit(Response(1, {}))
    with pytest.raises(TransportError):
        await conn.receive()


async def test_receive_waits_for_an_event(autojump_clock: trio.abc.Clock) -> None:
    conn = connection()
    async with trio.open_nursery() as nursery:
        got: list[TransportEvent] = []

        async def reader() -> None:
            got.append(await conn.receive())

        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        conn.emit(Response(1, {}))
    assert got == [Response(1, {})]


def test_the_pool_holds_two_more_than_the_calls_in_flight() -> None:
    assert HttpParams(NAME, max_connections=8).pool_size == 8 + EXTRA_CONNECTIONS == 10
