"""Durability-first era choice under ``protocol: auto`` (:func:`runner.session.negotiate.choose_era`): the pure
table, and the negotiation against the scripted servers of :mod:`tests.fakes.modern_http`."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
import trio
import trio.testing

from runner.protocol.jsonrpc import Request
from runner.session import SessionOptions, open_session
from runner.session.era import EraMemory
from runner.session.negotiate import ASK_INITIALIZE, LEGACY, MODERN, choose_era
from runner.testing.memory import memory_transport_pair
from tests.fakes.modern_http import LEGACY as V2025
from tests.fakes.modern_http import MODERN as V2026
from tests.fakes.modern_http import ModernServer
from tests.test_era import _serve_modern_stdio, connected

# (pinned, unsafe, tasks, http, accepts_initialize) -> era
TABLE = [
    # every call safe to repeat: the modern era, whatever the server offers
    *[((None, False, t, h, a), MODERN) for t in (False, True) for h in (False, True) for a in (None, False, True)],
    # not safe to repeat, tasks offered: 2026-07-28 with tasks
    *[((None, True, True, h, a), MODERN) for h in (False, True) for a in (None, False, True)],
    # not safe, no tasks, stdio: no era resumes a cut over stdio
    *[((None, True, False, False, a), MODERN) for a in (None, False, True)],
    # not safe, no tasks, HTTP: ask initialize, then 2025-11-25 if it is accepted, else 2026-07-28 (in doubt)
    ((None, True, False, True, None), ASK_INITIALIZE),
    ((None, True, False, True, True), LEGACY),
    ((None, True, False, True, False), MODERN),
    # pinned: always the pinned revision
    *[
        ((p, u, t, h, a), p)
        for p in ("2025-11-25", "2026-07-28")
        for u in (False, True)
        for t in (False, True)
        for h in (False, True)
        for a in (None, True)
    ],
]


@pytest.mark.parametrize(("given", "era"), TABLE)
def test_the_choice_table(given: tuple[str | None, bool, bool, bool, bool | None], era: str) -> None:
    pinned, unsafe, tasks, http, accepts = given
    choice = choose_era(pinned=pinned, unsafe=unsafe, tasks=tasks, http=http, accepts_initialize=accepts)
    assert choice.era == era
    assert choice.why


def test_the_reasons_say_why() -> None:
    doubt = choose_era(pinned=None, unsafe=True, tasks=False, http=True, accepts_initialize=False)
    assert "in doubt" in doubt.why and "cannot be resumed" in doubt.why
    legacy = choose_era(pinned=None, unsafe=True, tasks=False, http=True, accepts_initialize=True)
    assert "Last-Event-ID" in legacy.why and "event ids" not in legacy.why  # a JSON answer: not known
    ids = choose_era(pinned=None, unsafe=True, tasks=False, http=True, accepts_initialize=True, event_ids=True)
    assert ids.era == LEGACY and "its streams carry event ids" in ids.why
    none = choose_era(pinned=None, unsafe=True, tasks=False, http=True, accepts_initialize=True, event_ids=False)
    assert none.era == LEGACY and "no event id" in none.why and "in doubt" in none.why
    tasks = choose_era(pinned=None, unsafe=True, tasks=True, http=True, accepts_initialize=None)
    assert "task id survives a cut" in tasks.why
    pinned = choose_era(pinned="2026-07-28", unsafe=True, tasks=False, http=True, accepts_initialize=None)
    assert "pinned" in pinned.why


def durable(**changes: Any) -> SessionOptions:
    """Options of a server with a call not safe to repeat (each with its own era memory)."""
    return SessionOptions(name="m", durable=True, **changes)


async def test_a_dual_era_server_without_tasks_gets_2025_when_a_call_is_not_safe_to_repeat() -> None:
    server = ModernServer("dual")
    async with connected(server, durable()) as (session, _):
        assert not session.era.modern and session.protocol_version == V2025
        assert session.era_why is not None and "accepts initialize" in session.era_why
        await session.call_tool("echo", {})
    assert [p.method for p in server.posts][:2] == ["server/discover", "initialize"]


async def test_a_dual_era_server_keeps_the_modern_era_when_every_call_is_safe() -> None:
    server = ModernServer("dual")
    async with connected(server, SessionOptions(name="m")) as (session, _):
        assert session.era.modern and session.protocol_version == V2026
        assert session.era_why is None  # durability did not decide: nothing to say
    assert "initialize" not in [p.method for p in server.posts]


async def test_a_dual_era_server_offering_tasks_keeps_the_modern_era() -> None:
    server = ModernServer("dual", tasks=True)
    options = durable(tasks_extension=True)
    async with connected(server, options) as (session, _):
        assert session.era.modern
        assert session.era_why is not None and "tasks extension" in session.era_why
    assert "initialize" not in [p.method for p in server.posts]


async def test_tasks_the_workflow_turned_off_do_not_count() -> None:
    server = ModernServer("dual", tasks=True)
    async with connected(server, durable()) as (session, _):  # tasks_extension False: tasks: off
        assert not session.era.modern
    assert [p.method for p in server.posts][:2] == ["server/discover", "initialize"]


async def test_a_modern_only_server_without_tasks_is_modern_and_says_a_cut_is_in_doubt() -> None:
    server = ModernServer("modern")
    async with connected(server, durable()) as (session, warnings):
        assert session.era.modern and session.protocol_version == V2026
        assert session.era_why is not None and "in doubt" in session.era_why
        assert "refuses initialize" in session.era_why
        result = await session.call_tool("echo", {"x": 1})
        assert result.content[0].raw["text"] == '{"x": 1}'
    assert [p.method for p in server.posts][:2] == ["server/discover", "initialize"]
    assert not [w for w in warnings if "initialize" in w]  # the refused try is no warning


async def test_a_modern_only_server_offering_tasks_is_not_asked_initialize() -> None:
    server = ModernServer("modern", tasks=True)
    options = durable(tasks_extension=True)
    async with connected(server, options) as (session, _):
        assert session.era.modern and "task id survives" in (session.era_why or "")
    assert [p.method for p in server.posts] == ["server/discover"]


async def test_the_verdict_is_remembered_for_the_run_no_second_try() -> None:
    memory = EraMemory()
    refused = ModernServer("modern")
    options = durable(era_memory=memory)
    async with connected(refused, options):
        pass
    async with connected(refused, options) as (session, _):  # a reconnect: the probe, not initialize again
        assert session.era.modern and "in doubt" in (session.era_why or "")
    assert [p.method for p in refused.posts] == ["server/discover", "initialize", "server/discover"]
    memory = EraMemory()
    dual = ModernServer("dual")
    options = durable(era_memory=memory)
    async with connected(dual, options):
        pass
    assert memory.version == LEGACY
    async with connected(dual, options) as (session, _):  # straight to the handshake
        assert not session.era.modern
    assert [p.method for p in dual.posts if p.method != "notifications/initialized"] == [
        "server/discover",
        "initialize",
        "initialize",
    ]


async def test_a_pinned_2026_version_is_kept_even_when_a_call_is_not_safe() -> None:
    server = ModernServer("dual")
    options = durable(protocol=V2026)
    async with connected(server, options) as (session, _):
        assert session.era.modern
    assert "initialize" not in [p.method for p in server.posts]


async def test_over_stdio_a_modern_server_is_not_asked_initialize_and_nothing_is_said() -> None:
    seen: list[Any] = []
    async with memory_transport_pair("stdio: modern") as (client, end), trio.open_nursery() as nursery:
        nursery.start_soon(_serve_modern_stdio, end, seen)
        async with open_session(client, durable(server_log_level=None)) as session:
            assert session.era.modern and session.era_why is None
        nursery.cancel_scope.cancel()
    assert [m.method for m in seen if isinstance(m, Request)] == ["server/discover"]


class _SilentToInitialize(ModernServer):
    """A modern-only server that never answers ``initialize``."""

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST" and b'"initialize"' in await request.aread():
            await trio.sleep_forever()
        return await super().__call__(request)


async def test_an_initialize_without_answer_is_a_refusal_within_the_connect_bound(
    autojump_clock: trio.abc.Clock,
) -> None:
    server = _SilentToInitialize("modern")
    start = trio.current_time()
    async with connected(server, durable(initialize_timeout=5)) as (session, _):
        assert session.era.modern and "refuses initialize" in (session.era_why or "")
        assert trio.current_time() - start == pytest.approx(5)
