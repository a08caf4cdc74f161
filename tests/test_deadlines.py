"""The keeper of a session's call deadlines (:mod:`runner.session.deadlines`), on trio's virtual clock."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from runner._trio import single_error
from runner.errors import CallTimeout, NotDelivered
from runner.protocol.jsonrpc import Message, Request
from runner.protocol.mcp import Progress
from runner.session import SessionOptions, open_session
from runner.session.deadlines import Deadlines
from runner.session.pending import PendingCall
from runner.testing.memory import memory_transport_pair
from tests.fakes.server import FakeCall, FakeServer, text_result


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


@pytest.mark.parametrize("answered", [True, False], ids=["answered", "given-up-on"])
async def test_calls_that_ended_do_not_pile_up(monkeypatch: pytest.MonkeyPatch, answered: bool) -> None:
    """Deadlines an hour away, calls that end at once, answered or given up on (a caller cancelled: removed
    without an outcome): the heap must not grow with every call, nor be rebuilt on every add."""
    import runner.session.deadlines as module

    rebuilt = 0
    heapify = module.heapq.heapify

    def counting(heap: list[Any]) -> None:
        nonlocal rebuilt
        rebuilt += 1
        heapify(heap)

    monkeypatch.setattr(module.heapq, "heapify", counting)
    keeper = Deadlines()
    waiting = [PendingCall("tools/call", timeout=3600) for _ in range(10)]
    for call in waiting:
        keeper.add(call)
    for _ in range(10_000):
        call = PendingCall("tools/call", timeout=3600)
        keeper.add(call)
        if answered:
            call.finish({}, None)
        keeper.remove(call)
    assert len(keeper._heap) <= 2 * len(waiting) + 65
    assert {id(item[2]) for item in keeper._heap} >= {id(call) for call in waiting}
    assert rebuilt <= 10_000 // 64


async def slow(call: FakeCall) -> dict[str, Any]:
    await trio.sleep(1)
    return text_result("ok")


async def test_a_call_that_times_out_before_its_line_is_written_was_not_sent(autojump_clock: trio.abc.Clock) -> None:
    """A server that stops reading its input: call a's write never ends, call b waits behind it in the queue.
    When b's deadline passes its line is taken back: b surely never reached the server (``NotDelivered``, safe
    to send again), and the server is not told to cancel a request it never saw. a, whose line was taken by
    the writer, is in doubt (``CallTimeout``)."""
    errors: dict[str, Exception] = {}
    with single_error():
        async with memory_transport_pair(queued=True) as (client, end), trio.open_nursery() as nursery:
            server = FakeServer(end)
            server.tools.update(a=slow, b=slow)
            nursery.start_soon(server.serve)
            async with open_session(client, SessionOptions()) as session:
                send = client.send

                async def stuck(message: Message) -> None:
                    if isinstance(message, Request) and (message.params or {}).get("name") == "a":
                        await trio.sleep_forever()
                    await send(message)

                client.send = stuck  # type: ignore[method-assign]

                async def call(name: str) -> None:
                    try:
                        await session.call_tool(name, {}, timeout=5)
                    except Exception as exc:  # the test looks at what each call raised
                        errors[name] = exc

                async with trio.open_nursery() as calls:
                    calls.start_soon(call, "a")
                    await trio.testing.wait_all_tasks_blocked()
                    calls.start_soon(call, "b")
                await trio.testing.wait_all_tasks_blocked()
                sent = [m for m in server.received if isinstance(m, Request) and m.method == "tools/call"]
                assert sent == []
                assert isinstance(errors["a"], CallTimeout)
                assert isinstance(errors["b"], NotDelivered), errors["b"]
                assert "not sent within its 5 s timeout" in str(errors["b"])
                assert len(server.cancelled) == 1  # a's cancellation only
            nursery.cancel_scope.cancel()
