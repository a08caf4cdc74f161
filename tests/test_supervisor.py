"""ServerLink: one session per server for a run, reopened after a loss, on trio's virtual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from runner._trio import single_error
from runner.backoff import Backoff
from runner.engine.calls.servers import (
    LinkEvent,
    LinkFailed,
    LinkLost,
    LinkOpened,
    LinkPolicy,
    LinkRetrying,
    LinkState,
    ServerLink,
)
from runner.errors import ConnectFailed, HTTPStatusError, McpRunError, NotDelivered, UnsupportedProtocolVersion
from runner.session import Session, open_session
from runner.testing.memory import MemoryServerEnd, memory_transport_pair
from tests.fakes.server import FakeServer

NO_JITTER = Backoff(initial=0.5, maximum=30.0, jitter=0.0)


class Servers:
    """Opens fake sessions; ``failures`` scripts what the next opens raise (None: succeed)."""

    def __init__(self, failures: list[McpRunError | None] | None = None) -> None:
        self.failures = list(failures or [])
        self.opened_at: list[float] = []
        self.ends: list[MemoryServerEnd] = []
        self.down_until = 0.0  # until then every request fails NotDelivered (a server that cannot be reached)
        self.pings: list[float] = []

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Session]:
        self.opened_at.append(trio.current_time())
        failure = self.failures.pop(0) if self.failures else None
        if failure is not None:
            raise failure
        with single_error():
            async with memory_transport_pair() as (client, end), trio.open_nursery() as nursery:
                self.ends.append(end)
                nursery.start_soon(FakeServer(end).serve)
                send = client.send

                async def unreachable_while_down(message: Any) -> None:
                    if getattr(message, "method", None) == "ping":
                        self.pings.append(trio.current_time())
                    if trio.current_time() < self.down_until:
                        raise refused()
                    await send(message)

                client.send = unreachable_while_down  # type: ignore[method-assign]
                async with open_session(client) as session:
                    yield session
                nursery.cancel_scope.cancel()


def refused() -> NotDelivered:
    return NotDelivered("POST http://127.0.0.1:1/mcp: could not connect: ConnectError: connection refused")


def describe(events: list[LinkEvent]) -> list[tuple[str, float | int | None]]:
    out: list[tuple[str, float | int | None]] = []
    for e in events:
        if isinstance(e, LinkOpened):
            out.append(("opened", e.reconnects))
        elif isinstance(e, LinkRetrying):
            out.append(("retry", e.delay))
        elif isinstance(e, LinkLost):
            out.append(("lost", None))
        elif isinstance(e, LinkFailed):
            out.append(("failed", None))
    return out


@asynccontextmanager
async def running(servers: Servers, policy: LinkPolicy) -> AsyncIterator[tuple[ServerLink, list[LinkEvent]]]:
    events: list[LinkEvent] = []
    link = ServerLink("s", servers.open, policy, on_event=events.append)
    async with trio.open_nursery() as nursery:
        link.start(nursery)
        try:
            yield link, events
        finally:
            link.close()


async def test_first_connection_is_retried_on_the_exact_schedule_while_connect_timeout_lasts(
    autojump_clock: trio.abc.Clock,
) -> None:
    servers = Servers([refused(), refused(), refused()])
    policy = LinkPolicy(connect_timeout=30, backoff=NO_JITTER)
    async with running(servers, policy) as (link, events):
        session = await link.session()
        assert session.protocol_version is not None
    assert servers.opened_at == [0.0, 0.5, 1.5, 3.5]  # waits 0.5, 1, 2: what was announced
    assert describe(events) == [("retry", 0.5), ("retry", 1.0), ("retry", 2.0), ("opened", 0)]


async def test_first_connection_gives_up_when_the_next_wait_would_pass_connect_timeout(
    autojump_clock: trio.abc.Clock,
) -> None:
    servers = Servers([refused()] * 10)
    async with running(servers, LinkPolicy(connect_timeout=5, backoff=NO_JITTER)) as (link, events):
        with pytest.raises(ConnectFailed, match=r"could not connect for 3\.5s, giving up: .*connection refused"):
            await link.session()
        assert link.state is LinkState.FAILED
        with pytest.raises(ConnectFailed):  # every later caller gets the same error
            await link.session()
    assert servers.opened_at == [0.0, 0.5, 1.5, 3.5]  # the next wait (4 s) would end at 7.5 > 5
    assert describe(events)[-1] == ("failed", None)


async def test_an_http_server_briefly_unavailable_at_the_start_is_waited_for(autojump_clock: trio.abc.Clock) -> None:
    # session.initialize marks a 503/502 (and 429, 504) retryable
    unavailable = [ConnectFailed(f"s: could not initialize: {n}", retryable=True) for n in (503, 502)]
    servers = Servers(list(unavailable))
    async with running(servers, LinkPolicy(backoff=NO_JITTER)) as (link, _):
        await link.session()
    assert servers.opened_at == [0.0, 0.5, 1.5]


@pytest.mark.parametrize(
    "error",
    [
        ConnectFailed("cannot start server 'nope': No such file or directory"),  # misconfigured
        UnsupportedProtocolVersion("2025-11-25", "1999-01-01"),  # it answered, wrongly
        HTTPStatusError("401 Unauthorized", status_code=401),
    ],
)
async def test_a_first_connection_that_cannot_improve_fails_at_once(
    autojump_clock: trio.abc.Clock, error: McpRunError
) -> None:
    servers = Servers([error])
    async with running(servers, LinkPolicy(backoff=NO_JITTER)) as (link, _):
        with pytest.raises(type(error)):
            await link.session()
    assert servers.opened_at == [0.0]


async def test_a_stdio_server_gets_one_first_attempt(autojump_clock: trio.abc.Clock) -> None:
    servers = Servers([refused()])
    async with running(servers, LinkPolicy(retry_first=False, backoff=NO_JITTER)) as (link, _):
        with pytest.raises(NotDelivered):
            await link.session()
    assert servers.opened_at == [0.0]


async def test_an_unreachable_server_is_pinged_on_the_same_session_until_it_answers(
    autojump_clock: trio.abc.Clock,
) -> None:
    # Streamable HTTP: the connection still stands, so the session (and its calls' streams) is kept.
    servers = Servers()
    async with running(servers, LinkPolicy(reconnect=60, backoff=NO_JITTER)) as (link, events):
        first = await link.session()
        await trio.sleep(10)
        servers.down_until = 13.0
        link.lost(first, refused())
        assert link.state is LinkState.RECONNECTING  # at once: a caller asking now waits
        link.lost(first, refused())  # many calls notice the same loss: counted once
        assert await link.session() is first
        assert link.reconnects == 1
    assert servers.opened_at == [0.0]
    assert servers.pings == [10.5, 11.5, 13.5]
    assert describe(events) == [
        ("opened", 0),
        ("lost", None),
        ("retry", 0.5),
        ("retry", 1.0),
        ("retry", 2.0),
        ("opened", 1),
    ]
    opened = [e for e in events if isinstance(e, LinkOpened)]
    assert opened[1].down_for == pytest.approx(3.5)


async def test_a_dead_connection_is_reopened_with_backoff_within_the_budget(autojump_clock: trio.abc.Clock) -> None:
    servers = Servers([None, refused(), refused(), None])
    async with running(servers, LinkPolicy(reconnect=60, backoff=NO_JITTER)) as (link, events):
        first = await link.session()
        await trio.sleep(10)
        servers.ends[0].break_connection()  # a stdio server exited
        await trio.testing.wait_all_tasks_blocked()
        second = await link.session()
        assert second is not first
    assert servers.opened_at == [0.0, 10.5, 11.5, 13.5]
    assert describe(events) == [
        ("opened", 0),
        ("lost", None),
        ("retry", 0.5),
        ("retry", 1.0),
        ("retry", 2.0),
        ("opened", 1),
    ]


async def test_reconnecting_gives_up_after_the_budget_and_callers_get_the_error(
    autojump_clock: trio.abc.Clock,
) -> None:
    servers = Servers([None, *[refused()] * 20])
    async with running(servers, LinkPolicy(reconnect=10, backoff=NO_JITTER)) as (link, events):
        await link.session()
        servers.ends[0].break_connection()
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(ConnectFailed, match=r"s: could not reconnect for 7.5s, giving up"):
            await link.session()
    assert [round(t, 1) for t in servers.opened_at] == [0.0, 0.5, 1.5, 3.5, 7.5]
    assert describe(events)[-1] == ("failed", None)


async def test_pinging_an_unreachable_server_gives_up_after_the_budget(autojump_clock: trio.abc.Clock) -> None:
    servers = Servers()
    async with running(servers, LinkPolicy(reconnect=10, backoff=NO_JITTER)) as (link, _):
        session = await link.session()
        servers.down_until = 1000.0
        link.lost(session, refused())
        with pytest.raises(ConnectFailed, match=r"s: could not reconnect for 7.5s, giving up: .*connection refused"):
            await link.session()
    assert servers.pings == [0.5, 1.5, 3.5, 7.5]


async def test_reconnect_false_gives_up_at_the_first_loss(autojump_clock: trio.abc.Clock) -> None:
    servers = Servers([None])
    async with running(servers, LinkPolicy(reconnect=0, backoff=NO_JITTER)) as (link, _):
        link.lost(await link.session(), refused())
        with pytest.raises(ConnectFailed, match=r"reconnect: false"):
            await link.session()
    assert servers.opened_at == [0.0]


async def test_a_session_whose_connection_dies_is_noticed_without_a_call(autojump_clock: trio.abc.Clock) -> None:
    # A stdio server that exits: its session breaks, and the link reopens it (a new process).
    servers = Servers()
    async with running(servers, LinkPolicy(reconnect=60, backoff=NO_JITTER)) as (link, events):
        first = await link.session()
        servers.ends[0].break_connection()
        await trio.sleep(1)
        second = await link.session()
        assert second is not first and first.broken is not None
    assert describe(events) == [("opened", 0), ("lost", None), ("retry", 0.5), ("opened", 1)]


async def test_the_backoff_starts_over_only_once_a_call_was_answered(autojump_clock: trio.abc.Clock) -> None:
    servers = Servers()
    async with running(servers, LinkPolicy(reconnect=600, backoff=NO_JITTER)) as (link, events):
        for _ in range(3):  # a server that comes back and dies at once: ever slower
            link.lost(await link.session(), refused())
        link.healthy()  # ignored while reconnecting
        session = await link.session()
        link.healthy()
        link.lost(session, refused())
        await link.session()
    assert [e.delay for e in events if isinstance(e, LinkRetrying)] == [0.5, 1.0, 2.0, 0.5]


async def test_close_while_reconnecting_releases_the_callers(autojump_clock: trio.abc.Clock) -> None:
    servers = Servers()
    got: list[BaseException] = []
    async with running(servers, LinkPolicy(reconnect=600, backoff=NO_JITTER)) as (link, _):
        session = await link.session()
        servers.down_until = 1000.0
        link.lost(session, refused())

        async def caller() -> None:
            try:
                await link.session()
            except McpRunError as exc:
                got.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(caller)
            await trio.sleep(5)
            link.close()
    assert link.state is LinkState.CLOSED
    assert len(got) == 1 and isinstance(got[0], NotDelivered)
