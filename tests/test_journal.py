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


# Lines as a journal of format 3 holds them, written before events carried enums, and some with values a later
# version might write: every vocabulary field decodes to its enum, an unknown value as the fold tolerated it.
OLD_LINES = b"""\
{"seq":1,"ts":"2026-01-01T00:00:00.000Z","type":"run_started","run_id":"r","workflow":"/w.yaml","inputs":{},"fingerprints":{"a":"1"},"pid":1,"env":[],"journal":3}
{"seq":2,"ts":"2026-01-01T00:00:00.001Z","type":"session_failed","server":"s","kind":"connection-before-send","error":"down"}
{"seq":3,"ts":"2026-01-01T00:00:00.002Z","type":"item_dispatched","step":"a","item":"k1","index":0,"server":"s","tool":"t","request_id":1,"progress_token":1,"attempt":1}
{"seq":4,"ts":"2026-01-01T00:00:00.003Z","type":"item_failed","step":"a","item":"k1","index":0,"kind":"timeout","error":"late"}
{"seq":5,"ts":"2026-01-01T00:00:00.004Z","type":"doubt_decided","step":"a","keys":["k1"],"decision":"skip"}
{"seq":6,"ts":"2026-01-01T00:00:00.005Z","type":"item_dispatched","step":"a","item":"k2","index":1,"server":"s","tool":"t","request_id":2,"progress_token":2,"attempt":1}
{"seq":7,"ts":"2026-01-01T00:00:00.006Z","type":"item_failed","step":"a","item":"k2","index":1,"kind":"a-kind-of-later","error":"odd"}
{"seq":8,"ts":"2026-01-01T00:00:00.007Z","type":"item_dispatched","step":"a","item":"k3","index":2,"server":"s","tool":"t","request_id":3,"progress_token":3,"attempt":1}
{"seq":9,"ts":"2026-01-01T00:00:00.008Z","type":"doubt_decided","step":"a","keys":["k3"],"decision":"ponder"}
{"seq":10,"ts":"2026-01-01T00:00:00.009Z","type":"step_finished","step":"a","status":"a-status-of-later","counts":{}}
{"seq":11,"ts":"2026-01-01T00:00:00.010Z","type":"step_skipped","step":"b","reason":"why","cause":"if-false"}
{"seq":12,"ts":"2026-01-01T00:00:00.011Z","type":"step_skipped","step":"c","reason":"why","cause":"a-cause-of-later"}
{"seq":13,"ts":"2026-01-01T00:00:00.012Z","type":"step_finished","step":"d","status":"failed","counts":{},"error":"e","kind":"template-error"}
{"seq":14,"ts":"2026-01-01T00:00:00.013Z","type":"run_stopped","status":"in-doubt","exit_code":3}
{"seq":15,"ts":"2026-01-01T00:00:00.014Z","type":"run_finished","status":"a-status-of-later","exit_code":1}
"""


def test_a_journal_written_with_strings_reads_as_enums_and_unknown_values_as_before() -> None:
    from runner.engine.core.events import (
        DoubtDecided,
        ItemFailed,
        RunFinished,
        RunStopped,
        SessionFailed,
        StepFinished,
        StepSkipped,
    )
    from runner.engine.core.vocabulary import Decision, FailureKind, RunStatus, SkipCause, StepStatus

    events, end = parse_journal(OLD_LINES)
    assert end == len(OLD_LINES)
    by_seq = {entry.seq: entry.event for entry in events}
    assert isinstance(by_seq[2], SessionFailed) and by_seq[2].kind is FailureKind.NOT_SENT
    assert isinstance(by_seq[4], ItemFailed) and by_seq[4].kind is FailureKind.TIMEOUT
    assert isinstance(by_seq[5], DoubtDecided) and by_seq[5].decision is Decision.SKIP
    assert isinstance(by_seq[7], ItemFailed) and by_seq[7].kind is None  # unknown: no kind, as the fold had it
    assert isinstance(by_seq[9], DoubtDecided) and by_seq[9].decision is None  # nothing this version acts on
    assert isinstance(by_seq[10], StepFinished) and by_seq[10].status is StepStatus.FAILED  # unknown: failed
    assert isinstance(by_seq[11], StepSkipped) and by_seq[11].cause is SkipCause.CONDITION
    assert isinstance(by_seq[12], StepSkipped) and by_seq[12].cause is None
    assert isinstance(by_seq[13], StepFinished) and by_seq[13].kind is FailureKind.TEMPLATE_ERROR
    assert isinstance(by_seq[14], RunStopped) and by_seq[14].status is RunStatus.IN_DOUBT
    assert isinstance(by_seq[15], RunFinished) and by_seq[15].status is None
    state = fold(events)
    items = state.steps["a"].items
    assert items["k1"].status == "skipped" and items["k1"].decided is Decision.SKIP
    assert items["k2"].status == "failed" and items["k2"].kind is None
    assert items["k3"].status == "dispatched" and items["k3"].decided is None
    assert state.steps["a"].status is StepStatus.FAILED
    assert state.steps["b"].cause is SkipCause.CONDITION and state.steps["c"].cause is None
    assert state.steps["d"].kind is FailureKind.TEMPLATE_ERROR
    assert state.status is None and not state.finished


@pytest.mark.parametrize("field", ["kind", "status"])
def test_a_vocabulary_field_of_the_wrong_type_is_named(field: str) -> None:
    line = journal_line(seq=2, type="step_finished", step="a", status="failed", counts={}).replace(
        f'"{field}": "failed"'.encode() if field == "status" else b'"counts"',
        b'"status": 7' if field == "status" else b'"kind": [1], "counts"',
    )
    with pytest.raises(JournalCorrupt, match=f":2: not an event: step_finished: {field}: "):
        parse_journal(STARTED + line)
