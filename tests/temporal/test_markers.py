"""The dispatch markers (group-committed awaited heartbeats), the trio thread's crossings, and what a later
attempt of a batch does with an earlier attempt's markers: no server, no Temporal (trio's virtual clock)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from runner.temporal.batch import IN_DOUBT_FOUND, Batch, Sessions
from runner.temporal.bridge import TrioThread
from runner.temporal.devserver import dev_server_argv
from runner.temporal.markers import Markers
from runner.temporal.spec import RunSpec
from tests.temporal.support import fan_out_workflow


class Recorder:
    """A heartbeat sink that holds each commit until released, and checks that two never overlap."""

    def __init__(self) -> None:
        self.recorded: list[dict[str, Any]] = []
        self.release = trio.Event()
        self.in_flight = 0
        self.fail: Exception | None = None

    async def __call__(self, details: dict[str, Any]) -> None:
        self.in_flight += 1
        assert self.in_flight == 1, "two heartbeats in flight at once"
        try:
            await self.release.wait()
            if self.fail is not None:
                raise self.fail
            self.recorded.append(details)
        finally:
            self.in_flight -= 1


async def test_a_dispatch_waits_until_the_server_has_its_marker() -> None:
    sink = Recorder()
    markers = Markers(sink)
    done = trio.Event()

    async def dispatch() -> None:
        await markers.dispatched("a")
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(dispatch)
        await trio.testing.wait_all_tasks_blocked()
        assert not done.is_set() and sink.recorded == []
        sink.release.set()
    assert done.is_set()
    assert sink.recorded == [{"dispatched": ["a"], "ended": {}}]


async def test_dispatches_that_wait_share_one_heartbeat() -> None:
    sink = Recorder()
    markers = Markers(sink)
    async with trio.open_nursery() as nursery:
        for i in range(50):
            nursery.start_soon(markers.dispatched, f"k{i:02d}")
        await trio.testing.wait_all_tasks_blocked()
        sink.release.set()
    assert len(sink.recorded) == 2  # the first marker's heartbeat, then one for the 49 that waited
    assert sink.recorded[-1]["dispatched"] == [f"k{i:02d}" for i in range(50)]


async def test_ends_go_with_the_next_heartbeat_and_leave_the_dispatched_set() -> None:
    sink = Recorder()
    sink.release.set()
    markers = Markers(sink)
    await markers.dispatched("a")
    await markers.dispatched("b")
    markers.ended("a", {"status": "succeeded"})
    await markers.flush()
    assert sink.recorded[-1] == {"dispatched": ["b"], "ended": {"a": {"status": "succeeded"}}}


async def test_a_retry_sent_again_is_marked_dispatched_so_a_third_attempt_finds_it_in_doubt() -> None:
    sink = Recorder()
    sink.release.set()
    markers = Markers(sink, {"dispatched": [], "ended": {"a": {"key": "a", "status": "retry"}}})
    await markers.dispatched("a")  # the second attempt sends it again
    assert sink.recorded[-1] == {"dispatched": ["a"], "ended": {}}
    third = Markers(sink, sink.recorded[-1])  # the worker died: the next attempt starts from that heartbeat
    assert third.was_dispatched("a") and third.ended_before("a") is None


async def test_a_failed_heartbeat_fails_the_dispatch() -> None:
    sink = Recorder()
    sink.release.set()
    sink.fail = RuntimeError("heartbeat refused")
    markers = Markers(sink)
    with pytest.raises(RuntimeError, match="heartbeat refused"):
        await markers.dispatched("a")
    assert markers.heartbeats == 0


async def test_keep_alive_heartbeats_while_nothing_changes(autojump_clock: trio.abc.Clock) -> None:
    sink = Recorder()
    sink.release.set()
    markers = Markers(sink)
    with trio.move_on_after(10):
        await markers.keep_alive(3)
    assert len(sink.recorded) == 3


async def test_a_later_attempt_reuses_ends_and_finds_the_begun_in_doubt(tmp_path: Path) -> None:
    path = fan_out_workflow(tmp_path, 3, mode="count", extra="--count-file /nonexistent")
    spec = RunSpec(run_id="r", workflow=str(path), text=path.read_text())
    prior = {"dispatched": ["k0001"], "ended": {"k0000": {"key": "k0000", "index": 0, "status": "succeeded"}}}
    sink = Recorder()
    sink.release.set()
    markers = Markers(sink, prior)
    items = [{"key": f"k{i:04d}", "index": i, "args": {"key": f"k{i:04d}"}} for i in range(2)]
    async with trio.open_nursery() as nursery:
        batch = Batch(Sessions(nursery), spec, "call", items, markers)
        outcomes = await batch.run()
    assert outcomes[0] == prior["ended"]["k0000"]
    assert outcomes[1] == {"key": "k0001", "index": 1, "status": "in_doubt", "kind": "outcome-unknown",
                           "error": IN_DOUBT_FOUND}  # fmt: skip
    assert batch.sent == 0  # neither was sent again
    assert sink.recorded[-1]["ended"]["k0001"]["status"] == "in_doubt"


def test_the_trio_thread_runs_trio_functions_for_asyncio() -> None:
    thread = TrioThread()
    thread.start()

    async def double(x: int) -> int:
        await trio.lowlevel.checkpoint()
        return 2 * x

    async def boom() -> None:
        raise ValueError("from trio")

    async def main() -> tuple[int, str]:
        loop = asyncio.get_running_loop()

        async def via_asyncio() -> str:
            return await thread.to_asyncio(loop, lambda: asyncio.sleep(0, result="asyncio"))

        value = await thread.run(double, 21)
        with pytest.raises(ValueError, match="from trio"):
            await thread.run(boom)
        return value, await thread.run(via_asyncio)

    try:
        assert asyncio.run(main()) == (42, "asyncio")
    finally:
        thread.stop()


def test_cancelling_the_asyncio_side_cancels_the_trio_function() -> None:
    thread = TrioThread()
    thread.start()
    cancelled = trio.Event()

    async def forever() -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.set()
            raise

    async def main() -> None:
        task = asyncio.ensure_future(thread.run(forever))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(main())
        deadline = 100
        while not cancelled.is_set() and deadline:
            import time

            time.sleep(0.01)
            deadline -= 1
        assert cancelled.is_set()
    finally:
        thread.stop()


def test_the_dev_server_keeps_its_state_under_the_state_dir_with_the_wal_pragmas(tmp_path: Path) -> None:
    argv = dev_server_argv("temporal", port=7300, state_dir=tmp_path)
    assert argv[:3] == ["temporal", "server", "start-dev"]
    assert argv[argv.index("--ip") + 1] == "127.0.0.1"
    assert argv[argv.index("--port") + 1] == "7300"
    assert argv[argv.index("--db-filename") + 1] == str(tmp_path / "temporal" / "dev-7300.sqlite")
    pragmas = [argv[i + 1] for i, a in enumerate(argv) if a == "--sqlite-pragma"]
    assert pragmas == ["journal_mode=wal", "synchronous=normal"]


async def test_the_keeper_beats_to_the_core_then_the_server_on_a_fixed_interval(autojump_clock: trio.abc.Clock) -> None:
    sink = Recorder()
    sink.release.set()
    handed: list[tuple[int, dict[str, Any]]] = []  # (heartbeats the server had when handed to the core, details)
    markers = Markers(sink, alive=lambda details: handed.append((len(sink.recorded), details)))
    await markers.dispatched("a")  # a call in flight, slow: nothing else heartbeats
    async with trio.open_nursery() as nursery:
        nursery.start_soon(markers.keep_alive, 1.0)
        await trio.sleep(3.5)
        nursery.cancel_scope.cancel()
    assert [n for n, _details in handed] == [1, 2, 3]  # every second, each before the server records it
    assert [details for _n, details in handed] == sink.recorded[1:]  # the same details: never older
    assert markers.beats == 3 and markers.heartbeats == 4
