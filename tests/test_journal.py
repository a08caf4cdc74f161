"""The journal: folding, torn lines, the write-ahead writer with group commit, masking, run directories."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.engine.eventlog import EventLog, Masker
from runner.engine.events import ItemDispatched, LogMessage, ProgressNoted, RunFinished, encode
from runner.engine.journal import JournalCorrupt, parse_journal
from runner.engine.rundir import RunDir, is_locked, list_runs, new_run_id, prune
from runner.engine.state import fold
from runner.errors import BusyError
from tests.support import entry, folded


def line(**event: Any) -> bytes:
    """One journal line: ``event`` with the fields it leaves out filled in (see tests.support)."""
    return json.dumps(encode(entry(event))).encode() + b"\n"


def sample_journal() -> bytes:
    parts = [line(seq=1, type="run_started", run_id="r", workflow="/w.yaml", fingerprints={"a": "1"})]
    seq = 2
    for key in ("k1", "k2", "k3"):
        parts.append(line(seq=seq, type="item_dispatched", step="a", item=key, request_id=seq))
        seq += 1
        parts.append(line(seq=seq, type="progress", step="a", item=key, progress=1))
        seq += 1
        parts.append(line(seq=seq, type="item_succeeded", step="a", item=key, result={"content": []}))
        seq += 1
    parts.append(line(seq=seq, type="item_dispatched", step="a", item="k4", request_id=seq))
    parts.append(line(seq=seq + 1, type="item_failed", step="a", item="k5", kind="tool-error", error="x"))
    return b"".join(parts)


def test_fold_item_states() -> None:
    events, end = parse_journal(sample_journal())
    state = fold(events)
    assert end == len(sample_journal())
    assert state.run_id == "r" and state.workflow == "/w.yaml"
    items = state.steps["a"].items
    assert {k: i.status for k, i in items.items()} == {
        "k1": "succeeded",
        "k2": "succeeded",
        "k3": "succeeded",
        "k4": "dispatched",  # no result recorded: in doubt once its process is gone
        "k5": "failed",
    }
    assert [item.key for _, item in state.in_doubt()] == ["k4"]
    assert not state.finished


def test_torn_last_line_is_ignored_other_corruption_named() -> None:
    data = sample_journal()
    events, end = parse_journal(data + b'{"seq": 99, "type": "item_succ')
    assert end == len(data) and len(events) == len(parse_journal(data)[0])
    broken = data.replace(b'"type": "progress"', b'"type": progress', 1)
    assert broken != data
    with pytest.raises(JournalCorrupt, match=r"journal.jsonl:3: corrupt journal line"):
        parse_journal(broken)


def test_cancelled_and_timeout_are_in_doubt_tool_errors_are_not() -> None:
    state = folded(
        [
            {"type": "item_dispatched", "step": "s", "item": "a"},
            {"type": "item_failed", "step": "s", "item": "a", "kind": "cancelled"},
            {"type": "item_dispatched", "step": "s", "item": "b"},
            {"type": "item_failed", "step": "s", "item": "b", "kind": "timeout"},
            {"type": "item_dispatched", "step": "s", "item": "c"},
            {"type": "item_failed", "step": "s", "item": "c", "kind": "connection-before-send"},
        ]
    )
    assert sorted(i.key for _, i in state.in_doubt()) == ["a", "b"]
    assert state.steps["s"].items["c"].status == "failed"


def _resume_append(prefix: bytes) -> bytes:
    """What a resume does: cut back to the last complete line, then append its own records."""
    events, valid = parse_journal(prefix)
    state = fold(events)
    seq = state.last_seq
    out = prefix[:valid]
    out += line(seq=seq + 1, type="run_resumed")
    for _sid, item in state.in_doubt():
        out += line(seq=seq + 2, type="item_failed", step="a", item=item.key, kind="skipped-in-doubt", error="x")
    return out


@settings(max_examples=300)
@given(st.data())
def test_any_cut_then_resume_never_claims_success_without_its_record(data: st.DataObject) -> None:
    journal = sample_journal()
    cut = data.draw(st.integers(0, len(journal)))
    resumed = _resume_append(journal[:cut])
    events, valid = parse_journal(resumed)
    assert valid == len(resumed)  # a resumed journal always reads cleanly
    state = fold(events)
    complete_prefix = journal[: journal[:cut].rfind(b"\n") + 1].splitlines()
    for step in state.steps.values():
        for key, item in step.items.items():
            if item.status == "succeeded":
                record = f'"item": "{key}"'.encode()
                assert any(b'"item_succeeded"' in row and record in row for row in complete_prefix)


# -- the writer ----------------------------------------------------------------------------------------


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


# -- run directories -------------------------------------------------------------------------------


def test_run_ids_sort_by_time() -> None:
    ids = [new_run_id() for _ in range(5)]
    assert ids == sorted(ids) and len(set(ids)) == 5


def test_run_dir_permissions_lock_and_torn_tail(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "state")
    assert oct(run.path.stat().st_mode & 0o777) == "0o700"
    lock = run.lock()
    with pytest.raises(BusyError) as info:
        run.lock()
    assert info.value.pid == os.getpid()
    assert is_locked(run.path) == os.getpid()
    run.journal.write_bytes(sample_journal() + b'{"seq": 99, "ty')
    fd = run.open_for_append()
    os.close(fd)
    assert run.journal.read_bytes() == sample_journal()  # the torn tail was cut
    assert run.read().last_seq == 12
    lock.release()
    assert is_locked(run.path) is None
    summaries = list_runs(tmp_path / "state")
    assert [s.status for s in summaries] == ["interrupted"]


def test_prune_keeps_newest_finished_and_every_unfinished(tmp_path: Path) -> None:
    state = tmp_path / "state"
    runs = []
    for i in range(5):
        run = RunDir.create(state)
        finished = i != 2
        body = line(seq=1, type="run_started", run_id=run.run_id)
        if finished:
            body += line(seq=2, type="run_finished", status="succeeded", exit_code=0)
        run.journal.write_bytes(body)
        runs.append(run.run_id)
    removed = prune(state, keep=2)
    assert removed == [runs[0], runs[1]]
    assert sorted(p.name for p in (state / "runs").iterdir()) == sorted([runs[2], runs[3], runs[4]])
