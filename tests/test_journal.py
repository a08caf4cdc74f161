"""The journal file read back: complete lines parsed, a torn last line ignored, any other corruption named,
and a journal cut at any byte and resumed never claiming a success it has no record of."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.engine.core.state import RunState, fold
from runner.engine.journal.reader import (
    JournalCorrupt,
    first_record,
    last_record,
    parse_journal,
    read_what_can_be_read,
    workflow_named,
)
from tests.support import journal_line, sample_journal

STARTED = journal_line(seq=1, type="run_started", workflow="/w.yaml")


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
    with pytest.raises(JournalCorrupt, match=r"journal.jsonl:3: not JSON"):
        parse_journal(broken)


def _resume_append(prefix: bytes) -> bytes:
    """What a resume does: cut back to the last complete line, then append its own records."""
    events, valid = parse_journal(prefix)
    state = fold(events)
    seq = state.last_seq
    out = prefix[:valid]
    out += journal_line(seq=seq + 1, type="run_resumed")
    for _sid, item in state.in_doubt():
        out += journal_line(
            seq=seq + 2, type="item_failed", step="a", item=item.key, kind="skipped-in-doubt", error="x"
        )
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


def test_the_last_record_is_found_however_long_and_past_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    outputs = {"text": "x" * 300_000}  # a last line longer than any one read back from the end
    end = journal_line(seq=2, type="run_finished", status="succeeded", exit_code=0, outputs=outputs)
    path.write_bytes(STARTED + end + b'{"seq": 3, "ty')
    last = last_record(path)
    assert last is not None and last.seq == 2 and last.event.type == "run_finished"
    path.write_bytes(b'{"seq": 1, "ty')  # nothing complete
    assert last_record(path) is None and first_record(path) is None
    path.write_bytes(end.replace(b"}\n", b"\n"))  # complete, not an event
    assert last_record(path) is None


def test_a_first_record_that_is_not_run_started_is_named(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(STARTED)
    first = first_record(path)
    assert first is not None and first.event.type == "run_started"
    path.write_bytes(journal_line(seq=1, type="step_started", step="a"))
    with pytest.raises(JournalCorrupt) as info:
        first_record(path)
    assert (info.value.line, info.value.path, info.value.message) == (
        1,
        "type",
        "the first record is step_started, not run_started",
    )
    path.write_bytes(STARTED.replace(b'"pid": 1', b'"pid": [1]'))
    with pytest.raises(JournalCorrupt, match=r"journal.jsonl:1: not an event: run_started: pid: "):
        first_record(path)
    assert workflow_named(path) == "/w.yaml"  # whose run it may be, read as text
    path.write_bytes(STARTED[:30] + b"\n")
    assert workflow_named(path) is None


def test_a_first_line_torn_and_glued_to_the_next_names_no_other_workflow(tmp_path: Path) -> None:
    """A crash mid-write, then a resume appending after it, glues what follows to the torn line: a path cut
    there must not read as another workflow's (the run would then be left out, and a new run started)."""
    path = tmp_path / "journal.jsonl"
    glued = journal_line(seq=2, type="step_started", step="a")
    for cut in range(1, len(STARTED) - 1):
        path.write_bytes(STARTED[:cut] + glued)
        assert workflow_named(path) in ("/w.yaml", None), STARTED[:cut]


def test_what_comes_before_a_bad_line_is_read(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    lines = sample_journal().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:4], b'{"seq": 5, "ts": "t", "type": "item_failed", "kind": [1]}\n', *lines[4:]]))
    state = RunState()
    problem = read_what_can_be_read(path, state)
    assert (
        problem is not None and problem.line == 5 and str(problem).startswith(f"{path}:5: not an event: item_failed:")
    )
    assert state.events == 4 and state.steps["a"].items["k1"].status == "succeeded"
