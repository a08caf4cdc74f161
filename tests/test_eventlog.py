"""The event log (:mod:`runner.engine.journal.writer`): numbering and stamping, the write-ahead writer with group
commit, notes flushed on a timer, and masking secrets before anything is written or observed."""

from __future__ import annotations

import datetime
import json
import math
import os
import threading
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from runner._trio import single_error
from runner.engine.core.events import ItemDispatched, LogMessage, ProgressNoted, RunFinished, SessionOpened, StepSkipped
from runner.engine.journal import writer as eventlog
from runner.engine.journal.disk import DiskThread
from runner.engine.journal.reader import parse_journal
from runner.engine.journal.writer import EventLog, JournalWriteError, Masker


def test_event_log_numbers_and_stamps_entries() -> None:
    log = EventLog(None)
    seen: list[Any] = []
    log.subscribe(seen.append)
    log.record(StepSkipped(step="a", reason="x"))
    log.record(SessionOpened(server="s", protocol_version=None, server_info={}))
    assert [e.seq for e in seen] == [1, 2] and all(e.ts.endswith("Z") for e in seen)
    assert isinstance(seen[0].event, StepSkipped)


@given(st.lists(st.integers(min_value=0, max_value=4_102_444_800_000_000_000), min_size=1, max_size=20))
def test_timestamps_are_utc_to_the_millisecond_whatever_the_order_of_the_clock(times_ns: list[int]) -> None:
    # The stamp's text is cached per millisecond and per second: it must always be that instant's.
    for ns in times_ns:
        with mock.patch.object(eventlog.time, "time_ns", return_value=ns):
            stamp = eventlog._now()
        ms = ns // 1_000_000
        second = datetime.datetime.fromtimestamp(ms // 1000, tz=datetime.UTC)
        assert stamp == second.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


async def test_commit_is_durable_and_group_committed(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    log = EventLog(fd)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)

        async def dispatch(i: int) -> None:
            dispatch = ItemDispatched(
                step="s", item=str(i), index=None, server="s", tool="t", request_id=i, progress_token=i, attempt=1
            )
            await log.commit(dispatch)
            # when commit returns, the line is in the file
            assert f'"item":"{i}"'.encode() in path.read_bytes()

        async with trio.open_nursery() as calls:
            for i in range(50):
                calls.start_soon(dispatch, i)
        log.note(ProgressNoted(step="s", item="0", progress=1))
        log.record(RunFinished(status="succeeded", exit_code=0))
        log.close()
    os.close(fd)
    events, _ = parse_journal(path.read_bytes())
    assert [e.seq for e in events] == list(range(1, 53))
    assert isinstance(events[-1].event, RunFinished)
    assert log.fsyncs < 50  # group commit: fewer fsyncs than durable records


async def test_notes_are_flushed_on_a_timer(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    path = tmp_path / "journal.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    async def inline(fn: Any, *args: Any) -> None:  # no thread: the virtual clock sees every step
        fn(*args)

    log = EventLog(fd, flush_interval=0.5, offload=inline)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        log.note(ProgressNoted(step="s", item="", progress=1))
        await trio.sleep(0.1)
        assert path.read_bytes() == b""
        await trio.sleep(1)
        assert b'"progress"' in path.read_bytes()
        log.close()
    os.close(fd)


def test_masker_masks_encodes_and_decodes() -> None:
    masker = Masker({"env.API_TOKEN": "s3cr3t-value", "inputs.pw": 'with"quote', "env.DEBUG": "false", "env.N": "7"})
    event = {"a": "Bearer s3cr3t-value", "b": 'with"quote', "c": False, "d": "false", "e": "7", "f": "17", "g": 7}
    masked = masker.mask_value(event)
    line = json.dumps(masked)
    assert "s3cr3t" not in line and "quote" not in line
    assert masked["a"] == "Bearer ***env.API_TOKEN***" and masked["b"] == "***inputs.pw***"
    assert masked["c"] is False and masked["d"] == "***env.DEBUG***"  # JSON stays JSON: only strings are masked
    assert masked["e"] == "***env.N***" and masked["f"] == "17"  # a short secret is masked only where whole
    assert masker.encode_value(event) == masked  # no mark in it: its encoding is its masking
    assert masker.decode_value(json.loads(line)) == event
    assert masker.mask_value({"x": ["ok", 1]}) == {"x": ["ok", 1]}


async def test_observers_never_see_secrets() -> None:
    seen: list[Any] = []
    log = EventLog(None, masker=Masker({"env.TOKEN": "abcdef123"}))
    log.subscribe(seen.append)
    log.record(LogMessage(server="s", level="info", data="token is abcdef123"))
    assert seen[0].event.data == "token is ***env.TOKEN***"


class SlowDisk:
    """An offload that notes each job (virtual time, bytes, sync) and lets an fsync take ``fsync_s``."""

    def __init__(self, fsync_s: float = 0.0) -> None:
        self.fsync_s = fsync_s
        self.jobs: list[tuple[float, int, bool]] = []

    async def __call__(self, write: Any, data: bytes, sync: bool) -> None:
        write(data, False)
        if sync:
            await trio.sleep(self.fsync_s)
            write(b"", True)
        self.jobs.append((trio.current_time(), len(data), sync))


def _dispatch(i: int) -> ItemDispatched:
    return ItemDispatched(
        step="s", item=str(i), index=None, server="s", tool="t", request_id=i, progress_token=None, attempt=1
    )


async def test_records_are_written_then_fsynced_on_their_timers(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    fd = os.open(tmp_path / "journal.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    disk = SlowDisk()
    log = EventLog(fd, write_interval=0.02, sync_interval=0.1, offload=disk)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        start = trio.current_time()
        log.record(StepSkipped(step="a", reason="x"))
        log.record(StepSkipped(step="b", reason="x"))
        await trio.sleep(1)
        assert [(round(t - start, 3), sync) for t, _, sync in disk.jobs] == [(0.02, False), (0.1, True)]
        assert disk.jobs[0][1] > 0 and disk.jobs[1][1] == 0  # both lines in one write, then the fsync alone
        log.close()
    os.close(fd)
    assert log.fsyncs == 1 and log.handoffs == 2 and log.lines_written == 2


async def test_commits_that_arrive_during_an_fsync_share_the_next(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    fd = os.open(tmp_path / "journal.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    disk = SlowDisk(fsync_s=1.0)
    log = EventLog(fd, offload=disk)
    done: list[float] = []

    async def dispatch(i: int, at: float) -> None:
        await trio.sleep(at)
        await log.commit(_dispatch(i))
        done.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        start = trio.current_time()
        async with trio.open_nursery() as calls:
            calls.start_soon(dispatch, 0, 0.0)
            for i in range(1, 20):
                calls.start_soon(dispatch, i, 0.5)  # while the first fsync runs
        log.close()
    os.close(fd)
    assert sorted(round(t - start, 3) for t in done) == [1.0] + [2.0] * 19
    assert log.fsyncs == 2 and log.handoffs == 2


async def test_a_staged_record_opens_its_gate_when_durable_without_its_caller_waiting(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """``stage`` returns at once; its gate opens with the fsync that covers it, which every record staged before
    that fsync started shares; one staged during it waits for the next."""
    fd = os.open(tmp_path / "journal.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    disk = SlowDisk(fsync_s=1.0)
    log = EventLog(fd, offload=disk)
    opened: dict[int, float] = {}

    async def follow(i: int, gate: eventlog.DurableGate) -> None:
        await gate.wait()
        opened[i] = trio.current_time()

    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        start = trio.current_time()
        gates = {i: log.stage(_dispatch(i)) for i in range(3)}  # ready together: one fsync
        assert all(gate is not None and not gate.passed() for gate in gates.values())
        for i, gate in gates.items():
            assert gate is not None
            nursery.start_soon(follow, i, gate)
        await trio.sleep(0.5)
        late = log.stage(_dispatch(3))  # during the fsync: the next one
        assert late is not None
        nursery.start_soon(follow, 3, late)
        await trio.sleep(0.6)
        assert gates[0] is not None and gates[0].passed() and not late.passed()
        await trio.sleep(1)
        assert late.passed()
        log.close()
    os.close(fd)
    assert {i: round(t - start, 3) for i, t in opened.items()} == {0: 1.0, 1: 1.0, 2: 1.0, 3: 2.0}
    assert log.fsyncs == 2
    assert EventLog(None).stage(_dispatch(9)) is None  # no journal: nothing to wait for


async def test_a_gate_raises_once_the_journal_cannot_be_written(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    fd = os.open(tmp_path / "journal.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    async def full(write: Any, data: bytes, sync: bool) -> None:
        raise OSError(28, "No space left on device")

    log = EventLog(fd, offload=full)
    gate = log.stage(_dispatch(1))
    assert gate is not None
    with pytest.raises(JournalWriteError), single_error():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(log.run)
            with pytest.raises(JournalWriteError):  # woken by the failure (the writer raises it too)
                await gate.wait()
    assert not gate.passed()
    with pytest.raises(JournalWriteError, match="No space left"):
        await gate.wait()
    with pytest.raises(JournalWriteError):
        log.stage(_dispatch(2))
    os.close(fd)


async def test_append_does_not_wait_for_the_disk_but_refuses_once_it_failed(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    path = tmp_path / "journal.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    async def failing(write: Any, data: bytes, sync: bool) -> None:
        raise OSError(28, "No space left on device")

    log = EventLog(fd, offload=failing)
    with pytest.raises(JournalWriteError, match="No space left"), single_error():
        async with trio.open_nursery() as nursery:
            await nursery.start(log.run)
            start = trio.current_time()
            log.append(_dispatch(1))  # returns at once: nothing is waited for
            assert trio.current_time() == start and path.read_bytes() == b""
            await trio.sleep(1)
    with pytest.raises(JournalWriteError):
        log.append(_dispatch(2))
    os.close(fd)


async def test_sync_soon_fsyncs_now(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    fd = os.open(tmp_path / "journal.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    disk = SlowDisk()
    log = EventLog(fd, write_interval=0.5, sync_interval=5, offload=disk)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        start = trio.current_time()
        log.record(StepSkipped(step="a", reason="x"))
        log.sync_soon()
        await trio.sleep(0.1)
        assert [(round(t - start, 3), sync) for t, _, sync in disk.jobs] == [(0.0, True)]
        await trio.sleep(10)  # nothing left to sync: the writer waits (it does not spin)
        assert len(disk.jobs) == 1
        log.close()
    os.close(fd)


async def test_the_disk_thread_runs_jobs_in_its_own_thread_and_finishes_a_job_it_started() -> None:
    thread = DiskThread(inline_under=0)  # no job is quick enough: after the first, inline, they run in the thread
    ran_in: list[int] = []
    gate = threading.Event()
    finished: list[str] = []

    def job(name: str) -> None:
        ran_in.append(threading.get_ident())
        if name == "held":
            gate.wait(10)
        finished.append(name)

    def fails() -> None:
        raise OSError(5, "I/O error")

    with trio.fail_after(10):
        thread.start()
        try:
            await thread.run(job, "first")
            await thread.run(job, "plain")
            assert ran_in == [threading.get_ident(), ran_in[1]] and ran_in[1] != threading.get_ident()
            with pytest.raises(OSError, match="I/O error"):
                await thread.run(fails)
            async with trio.open_nursery() as nursery:

                async def cancelled() -> None:
                    with trio.CancelScope() as scope:
                        scope.cancel()
                        await thread.run(job, "held")  # cancelled, yet returns only once the job is done
                    finished.append("caller")

                nursery.start_soon(cancelled)
                await trio.testing.wait_all_tasks_blocked()
                gate.set()
            assert finished == ["first", "plain", "held", "caller"]
        finally:
            thread.stop()


async def test_the_disk_thread_runs_jobs_inline_while_they_are_quick() -> None:
    """Jobs run inline, in the trio thread, while each is quicker than ``inline_under``; one that is not (here, one
    that raised: a failing disk is no quick one) sends the next ``slow_jobs`` to the thread, then inline is tried
    again."""
    thread = DiskThread(inline_under=math.inf, slow_jobs=2)
    ran_in: list[int] = []

    def job() -> None:
        ran_in.append(threading.get_ident())

    def fails() -> None:
        ran_in.append(threading.get_ident())
        raise OSError(5, "I/O error")

    here = threading.get_ident()
    with trio.fail_after(10):
        thread.start()
        try:
            await thread.run(job)
            await thread.run(job)
            with pytest.raises(OSError, match="I/O error"):
                await thread.run(fails)
            for _ in range(4):
                await thread.run(job)
        finally:
            thread.stop()
    assert [t == here for t in ran_in] == [True, True, True, False, False, True, True]


async def test_the_disk_thread_sends_jobs_to_the_thread_once_they_typically_are_slow() -> None:
    """The odd slow job (one in eight at 6 ms, the rest at 0.3 ms) keeps the jobs inline; jobs that take 10 ms
    go to the thread after a few (their moving average passes 5 ms), ``slow_jobs`` at a time with one tried inline
    between; quick ones bring them back."""
    now = [0.0]
    thread = DiskThread(slow_jobs=3, clock=lambda: now[0])
    here = threading.get_ident()
    ran: list[bool] = []

    def job(seconds: float) -> None:
        inline = threading.get_ident() == here
        ran.append(inline)
        if inline:
            now[0] += seconds

    with trio.fail_after(10):
        thread.start()
        try:
            for i in range(24):
                await thread.run(job, 0.006 if i % 8 == 7 else 0.0003)
            assert all(ran)
            ran.clear()
            for _ in range(12):
                await thread.run(job, 0.010)
            # five inline (the average passes 5 ms), three in the thread, one tried inline (still slow), three more
            assert ran == [True] * 5 + [False] * 3 + [True] + [False] * 3
            ran.clear()
            for _ in range(6):
                await thread.run(job, 0.0003)
            # each quick one tried inline lowers the average: the second brings it under 5 ms
            assert ran == [True] + [False] * 3 + [True, True]
        finally:
            thread.stop()
