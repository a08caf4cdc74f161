"""The journal file read back: complete lines parsed, a torn last line ignored, any other corruption named,
and a journal cut at any byte and resumed never claiming a success it has no record of."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.engine.journal import JournalCorrupt, parse_journal
from runner.engine.state import fold
from tests.support import journal_line, sample_journal


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
