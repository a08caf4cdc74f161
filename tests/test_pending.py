"""Calls waiting for an answer (:mod:`runner.session.pending`): their write state, what a dying connection
makes of each, the first outcome winning, and progress moving the idle deadline."""

from __future__ import annotations

import pytest
import trio

from runner.errors import NotDelivered, OutcomeUnknown, TransportError
from runner.protocol.mcp import Progress
from runner.session.pending import PendingCall, PendingCalls, Write


async def test_a_dying_connection_fails_each_call_as_its_write_says() -> None:
    calls = PendingCalls()
    unsent, sending, written = PendingCall("tools/call"), PendingCall("tools/call"), PendingCall("ping")
    sending.start_write()
    written.start_write()
    written.end_write(written=True)
    for rid, call in enumerate((unsent, sending, written), start=1):
        calls.add(rid, call)
    calls.fail_all(TransportError("pipe closed", stderr="tail"), name="srv", what="connection lost")
    assert isinstance(unsent.error, NotDelivered) and not isinstance(unsent.error, OutcomeUnknown)
    assert str(unsent.error).startswith("srv: connection lost before tools/call request 1 was sent: pipe closed")
    assert not sending.done.is_set()  # its own write decides
    assert isinstance(written.error, OutcomeUnknown) and written.error.stderr == "tail"
    assert str(written.error).startswith("srv: connection lost after ping request 3 was sent")


async def test_a_write_is_made_once_and_a_failed_one_leaves_the_call_unsent() -> None:
    call = PendingCall("tools/call")
    call.start_write()
    with pytest.raises(RuntimeError):
        call.start_write()
    call.end_write(written=False)
    assert call.write is Write.UNSENT
    with pytest.raises(RuntimeError):
        call.end_write(written=True)


async def test_the_first_outcome_wins() -> None:
    call = PendingCall("ping")
    call.finish({"a": 1}, None)
    call.finish(None, NotDelivered("late"))
    assert call.result == {"a": 1} and call.error is None


async def test_progress_pushes_the_idle_deadline_back_never_past_the_hard_one(autojump_clock: trio.abc.Clock) -> None:
    seen: list[Progress] = []
    call = PendingCall("tools/call", timeout=10, idle_timeout=4, on_progress=seen.append)
    assert call.first_deadline == trio.current_time() + 4
    with trio.CancelScope(deadline=call.first_deadline) as scope:
        call.scope = scope
        await trio.sleep(3)
        call.progressed(Progress(1))
        assert scope.deadline == trio.current_time() + 4
        await trio.sleep(3)
        call.progressed(Progress(2))
        assert scope.deadline == call.timeout_at  # 6 + 4 would pass the hard cap at 10
    assert seen == [Progress(1), Progress(2)]
    assert PendingCall("ping").first_deadline == float("inf")
