"""The event log (:mod:`runner.engine.eventlog`): numbering and stamping, the write-ahead writer with group
commit, notes flushed on a timer, and masking secrets before anything is written or observed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import trio

from runner.engine.eventlog import EventLog, Masker
from runner.engine.events import ItemDispatched, LogMessage, ProgressNoted, RunFinished, SessionOpened, StepSkipped
from runner.engine.journal import parse_journal


def test_event_log_numbers_and_stamps_entries() -> None:
    log = EventLog(None)
    seen: list[Any] = []
    log.subscribe(seen.append)
    log.record(StepSkipped(step="a", reason="x"))
    log.record(SessionOpened(server="s", protocol_version=None, server_info={}))
    assert [e.seq for e in seen] == [1, 2] and all(e.ts.endswith("Z") for e in seen)
    assert isinstance(seen[0].event, StepSkipped)


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


def test_masker_masks_and_unmasks() -> None:
    masker = Masker({"env.API_TOKEN": "s3cr3t-value", "inputs.pw": 'with"quote', "env.DEBUG": "false", "env.N": "7"})
    event = {"a": "Bearer s3cr3t-value", "b": 'with"quote', "c": False, "d": "false", "e": "7", "f": "17", "g": 7}
    masked = masker.mask_value(event)
    line = json.dumps(masked)
    assert "s3cr3t" not in line and "quote" not in line
    assert masked["a"] == "Bearer ***env.API_TOKEN***" and masked["b"] == "***inputs.pw***"
    assert masked["c"] is False and masked["d"] == "***env.DEBUG***"  # JSON stays JSON: only strings are masked
    assert masked["e"] == "***env.N***" and masked["f"] == "17"  # a short secret is masked only where whole
    assert json.loads(masker.unmask(line)) == event
    assert masker.mask_value({"x": ["ok", 1]}) == {"x": ["ok", 1]}


async def test_observers_never_see_secrets() -> None:
    seen: list[Any] = []
    log = EventLog(None, masker=Masker({"env.TOKEN": "abcdef123"}))
    log.subscribe(seen.append)
    log.record(LogMessage(server="s", level="info", data="token is abcdef123"))
    assert seen[0].event.data == "token is ***env.TOKEN***"
