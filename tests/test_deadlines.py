"""The keeper of a session's call deadlines (:mod:`runner.session.deadlines`), on trio's virtual clock."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from runner.protocol.mcp import Progress
from runner.session.deadlines import Deadlines
from runner.session.pending import PendingCall


async def test_each_call_expires_at_its_deadline_and_progress_moves_it(autojump_clock: trio.abc.Clock) -> None:
    keeper = Deadlines()
    ended: dict[str, float] = {}
    start = trio.current_time()

    async def wait(name: str, call: PendingCall) -> None:
        keeper.add(call)
        await call.done.wait()
        keeper.remove(call)
        ended[name] = trio.current_time() - start if call.expired else -1

    hard = PendingCall("tools/call", timeout=10)
    idle = PendingCall("tools/call", idle_timeout=3, timeout=100)
    answered = PendingCall("tools/call", timeout=5)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keeper.run)
        nursery.start_soon(wait, "hard", hard)
        nursery.start_soon(wait, "idle", idle)
        nursery.start_soon(wait, "answered", answered)
        await trio.sleep(2)
        idle.progressed(Progress(progress=1))  # pushed back to 2 + 3
        answered.finish({}, None)
        await trio.sleep(20)
        nursery.cancel_scope.cancel()
    assert ended == {"answered": -1, "idle": pytest.approx(5), "hard": pytest.approx(10)}


async def test_calls_that_ended_do_not_pile_up(autojump_clock: trio.abc.Clock) -> None:
    # Deadlines minutes away, calls answered in milliseconds: the heap must not grow with every call.
    keeper = Deadlines()
    waiting = [PendingCall("tools/call", idle_timeout=300) for _ in range(10)]
    for call in waiting:
        keeper.add(call)
    for _ in range(10_000):
        call = PendingCall("tools/call", idle_timeout=300)
        keeper.add(call)
        call.finish({}, None)
        keeper.remove(call)
    assert len(keeper._heap) <= 2 * len(waiting) + 65
    assert {id(item[2]) for item in keeper._heap} >= {id(call) for call in waiting}
