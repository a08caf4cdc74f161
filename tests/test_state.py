"""RunState: the one fold of a run's events, read by resume, `runs`, `show`, the views and the summary."""

from __future__ import annotations

import pytest

from runner.engine.core.state import StepCounts
from runner.engine.core.vocabulary import FailureKind, ItemStatus, RunStatus, SkipCause, StepStatus
from runner.engine.journal.reader import closes
from tests.snapshots import entries
from tests.support import entry, folded


def test_items_move_through_their_statuses_and_counts_follow() -> None:
    state = folded(
        [
            {"type": "step_started", "step": "s", "items": 6},
            {"type": "item_dispatched", "step": "s", "item": "ok"},
            {"type": "item_succeeded", "step": "s", "item": "ok"},
            {"type": "item_dispatched", "step": "s", "item": "lost"},
            {"type": "item_failed", "step": "s", "item": "lost", "kind": "outcome-unknown", "error": "x"},
            {"type": "item_dispatched", "step": "s", "item": "bad"},
            {"type": "item_failed", "step": "s", "item": "bad", "kind": "tool-error", "error": "no"},
            {"type": "item_dispatched", "step": "s", "item": "flying"},
            {"type": "item_dispatched", "step": "s", "item": "again"},
            {"type": "item_failed", "step": "s", "item": "again", "kind": "connection-before-send", "retrying": True},
            {"type": "item_failed", "step": "s", "item": "gone", "kind": "skipped-in-doubt", "error": "skipped"},
        ]
    )
    step = state.steps["s"]
    statuses = {key: item.status for key, item in step.items.items()}
    assert statuses == {
        "ok": ItemStatus.SUCCEEDED,
        "lost": ItemStatus.IN_DOUBT,
        "bad": ItemStatus.FAILED,
        "flying": ItemStatus.DISPATCHED,
        "again": ItemStatus.PENDING,  # not delivered, another attempt was to follow: surely not run
        "gone": ItemStatus.SKIPPED,
    }
    assert step.items["bad"].kind is FailureKind.TOOL_ERROR
    # A live run's dispatched call is running; once no process holds the run, it is in doubt.
    assert step.counts(live=True) == StepCounts(6, 1, 2, 1, 1, 1, 0)
    assert step.counts(live=False) == StepCounts(6, 1, 2, 2, 0, 1, 0)
    assert sorted(item.key for _, item in state.in_doubt()) == ["flying", "lost"]
    assert step.calls.keys() == {"flying"}  # in flight now


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


def test_a_later_record_decides_and_late_progress_is_ignored() -> None:
    state = folded(
        [
            {"type": "item_dispatched", "step": "s", "item": "a"},
            {"type": "item_failed", "step": "s", "item": "a", "kind": "outcome-unknown", "retrying": True},
            {"type": "item_dispatched", "step": "s", "item": "a"},
            {"type": "progress", "step": "s", "item": "a", "progress": 1, "total": 2, "message": "half"},
            {"type": "item_succeeded", "step": "s", "item": "a"},
            {"type": "progress", "step": "s", "item": "a", "progress": 2, "total": 2},
        ]
    )
    item = state.steps["s"].items["a"]
    assert (item.status, item.attempts, state.steps["s"].calls) == (ItemStatus.SUCCEEDED, 2, {})
    assert state.steps["s"].by_status[ItemStatus.SUCCEEDED] == 1 and state.last_seq == 6


def test_open_and_closed_runs() -> None:
    base = [{"type": "run_started"}]
    assert not folded(base).finished and folded(base).status is None  # a crash: open
    stopped = folded([*base, {"type": "run_stopped", "status": "in-doubt", "exit_code": 5}])
    assert (stopped.finished, stopped.status) == (False, RunStatus.IN_DOUBT)
    closed = folded([*base, {"type": "run_finished", "status": "failed", "exit_code": 1}])
    assert closed.finished
    reopened = folded(
        [
            *base,
            {"type": "run_finished", "status": "failed", "exit_code": 1},
            {"type": "run_resumed", "retry_failed": True},
        ]
    )
    assert (reopened.finished, reopened.retry_failed, reopened.attempts) == (False, True, 2)
    # journals of earlier versions closed in-doubt runs with run_finished: they read as open
    assert not folded([*base, {"type": "run_finished", "status": "in-doubt", "exit_code": 5}]).finished
    assert closes(entry({"type": "run_finished", "status": "succeeded"}))
    assert not closes(entry({"type": "run_stopped", "status": "incomplete", "exit_code": 4}))


def test_a_changed_step_drops_its_history() -> None:
    state = folded(
        [
            {"type": "item_succeeded", "step": "s", "item": "a"},
            {"type": "item_failed", "step": "s", "item": "b", "kind": "tool-error"},
            {"type": "step_started", "step": "s", "items": 1, "fresh": True},
        ]
    )
    assert state.steps["s"].items == {} and state.steps["s"].counts().done == 0


def test_steps_and_sessions() -> None:
    state = folded(
        [
            {"type": "session_opened", "server": "docs", "server_info": {"name": "d"}},
            {"type": "step_started", "step": "a"},
            {"type": "session_lost", "server": "docs", "error": "gone"},
            {"type": "session_failed", "server": "docs", "kind": "connection-before-send", "error": "given up"},
            {
                "type": "step_finished",
                "step": "a",
                "status": "incomplete",
                "error": "given up",
                "kind": "connection-before-send",
            },
            {"type": "step_skipped", "step": "b", "reason": "dependency 'a' is incomplete"},
        ]
    )
    assert (state.steps["a"].status, state.steps["a"].kind) == (StepStatus.INCOMPLETE, FailureKind.NOT_SENT)
    assert (state.steps["b"].status, state.steps["b"].reason) == (StepStatus.SKIPPED, "dependency 'a' is incomplete")
    assert (state.sessions["docs"].status, state.sessions["docs"].error) == ("failed", "given up")
    state.apply(entry({"type": "run_resumed"}, seq=99))
    assert state.sessions == {}  # a new attempt opens its sessions afresh


def test_a_skip_keeps_its_cause_forgets_earlier_failures_and_a_start_clears_it() -> None:
    state = folded(
        [
            {"type": "step_skipped", "step": "a", "reason": "its `if` condition is false", "cause": "if-false"},
            {"type": "step_skipped", "step": "b", "reason": "dependency 'x' failed"},  # a journal of 0.1
            {"type": "step_skipped", "step": "c", "reason": "?", "cause": "a-cause-of-a-later-version"},
        ]
    )
    assert [state.steps[s].cause for s in "abc"] == [SkipCause.CONDITION, None, None]
    assert state.steps["c"].status is StepStatus.SKIPPED
    state.apply(entry({"type": "step_started", "step": "a"}, seq=10))
    for n, (key, kind) in enumerate(
        [("ok", None), ("bad", "tool-error"), ("lost", "timeout"), ("skip", "skipped-in-doubt")]
    ):
        state.apply(entry({"type": "item_dispatched", "step": "a", "item": key}, seq=20 + n))
        fields = (
            {"type": "item_failed", "step": "a", "item": key, "kind": kind}
            if kind
            else {"type": "item_succeeded", "step": "a", "item": key}
        )
        state.apply(entry(fields, seq=30 + n))
    state.apply(entry({"type": "step_finished", "step": "a", "status": "failed"}, seq=40))
    assert state.steps["a"].counts(live=False).as_dict() == {
        "total": 4, "succeeded": 1, "failed": 2, "in_doubt": 1, "skipped": 1, "reused": 0,
    }  # fmt: skip
    # A later attempt skips it: the failure is forgotten; what succeeded or may have happened is not.
    state.apply(entry({"type": "step_skipped", "step": "a", "reason": "r", "cause": "if-false"}, seq=50))
    assert sorted(state.steps["a"].items) == ["lost", "ok", "skip"]
    assert state.steps["a"].counts(live=False).as_dict() == {
        "total": 3, "succeeded": 1, "failed": 1, "in_doubt": 1, "skipped": 1, "reused": 0,
    }  # fmt: skip
    state.apply(entry({"type": "step_started", "step": "a"}, seq=60))
    assert (state.steps["a"].status, state.steps["a"].cause, state.steps["a"].reason) == (
        StepStatus.RUNNING,
        None,
        None,
    )


@pytest.mark.parametrize("name", ["succeeded", "failed", "fanout", "interrupted", "in_doubt"])
def test_recorded_journals_fold(name: str) -> None:
    state = folded(entries(name))
    assert state.events == len(entries(name)) and state.run_id is not None
    total = sum(step.counts(live=False).done for step in state.steps.values())
    assert total == sum(len(step.items) for step in state.steps.values()) - sum(
        step.by_status[ItemStatus.PENDING] for step in state.steps.values()
    )
