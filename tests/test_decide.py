"""Choosing a run and deciding a resume: pure functions, no files, no clock."""

from __future__ import annotations

import pytest

from runner.engine.core.resume import (
    Choice,
    EnvironmentChanged,
    NoRunToRetry,
    NothingToRetry,
    NoUnfinishedRun,
    RunAlreadyFinished,
    RunChanged,
    RunDamaged,
    RunInfo,
    UnfinishedRun,
    choose_run,
    resume_plan,
)
from runner.engine.core.vocabulary import RunStatus
from runner.exitcodes import ExitCode
from tests.support import folded

OPEN = RunInfo("r3", None, running_pid=None)
FAILED = RunInfo("r2", RunStatus.FAILED)
SUCCEEDED = RunInfo("r1", RunStatus.SUCCEEDED)


@pytest.mark.parametrize(
    ("runs", "flags", "expected"),
    [
        ([], {}, Choice(None)),  # nothing yet: a new run
        ([SUCCEEDED, FAILED], {}, Choice(None)),  # all closed: a new run
        ([SUCCEEDED, OPEN], {"resume": True}, Choice("r3")),  # the crontab line finishes the open one
        ([SUCCEEDED], {"resume": True}, Choice(None)),  # ... or starts one
        ([OPEN], {"new_run": True}, Choice(None)),
        ([SUCCEEDED, FAILED], {"retry_failed": True}, Choice("r2")),  # reopens the newest, failed
        ([FAILED, OPEN], {"retry_failed": True}, Choice("r3")),  # an open one comes first
        ([SUCCEEDED, FAILED], {"run_id": "r1"}, Choice("r1")),  # named: that run (resume_plan refuses it)
        ([OPEN], {"resume": True, "start_new": False}, Choice("r3")),
    ],
)
def test_choose_run(runs: list[RunInfo], flags: dict[str, object], expected: Choice) -> None:
    assert choose_run(runs, **flags) == expected  # type: ignore[arg-type]


def test_a_plain_invocation_never_starts_a_second_run() -> None:
    with pytest.raises(UnfinishedRun) as info:
        choose_run([SUCCEEDED, RunInfo("r3", None, running_pid=42)])
    assert (info.value.run_id, info.value.running_pid, info.value.exit_code) == ("r3", 42, ExitCode.USAGE)


@pytest.mark.parametrize(
    "flags", [{}, {"resume": True}, {"retry_failed": True}, {"resume": True, "start_new": False}, {"run_id": "r4"}]
)
def test_a_run_that_cannot_be_read_is_never_replaced(flags: dict[str, object]) -> None:
    damaged = RunInfo("r4", None, damaged="j.jsonl:1: not JSON")
    with pytest.raises(RunDamaged) as info:
        choose_run([SUCCEEDED, damaged, FAILED], **flags)  # type: ignore[arg-type]
    assert (info.value.run_id, info.value.first, info.value.exit_code) == ("r4", True, ExitCode.USAGE)
    assert "j.jsonl:1: not JSON" in str(info.value)
    assert choose_run([damaged], new_run=True) == Choice(None)  # asked for by name: beside it
    assert choose_run([damaged, OPEN], run_id="r3") == Choice("r3")  # another run, named


def test_retry_failed_needs_a_run_and_a_succeeded_one_is_nothing_to_do() -> None:
    with pytest.raises(NoRunToRetry):
        choose_run([], retry_failed=True)
    with pytest.raises(NothingToRetry) as info:
        choose_run([FAILED, SUCCEEDED], retry_failed=True)
    assert info.value.exit_code == ExitCode.OK
    with pytest.raises(NothingToRetry):
        choose_run([SUCCEEDED], run_id="r1", retry_failed=True)


def test_resume_workflow_never_starts_a_run() -> None:
    with pytest.raises(NoUnfinishedRun) as info:
        choose_run([SUCCEEDED, FAILED], resume=True, start_new=False)
    assert info.value.newest_failed == "r2"  # the CLI suggests --retry-failed
    with pytest.raises(NoUnfinishedRun) as info:
        choose_run([FAILED, SUCCEEDED], resume=True, start_new=False)
    assert info.value.newest_failed is None


def journal(*, closed: str | None = None, inputs: dict[str, object] | None = None) -> list[dict[str, object]]:
    events: list[dict[str, object]] = [
        {"type": "run_started", "workflow_hash": "h", "fingerprints": {"a": "1", "b": "2"}, "inputs": inputs or {}},
        {"type": "item_dispatched", "step": "a", "item": "k"},
    ]
    if closed is not None:
        events.append({"type": "run_finished", "status": closed, "exit_code": 0})
    return events


def plan_for(events: list[dict[str, object]], **kw: object) -> object:
    defaults: dict[str, object] = {
        "run_id": "r",
        "workflow_hash": "h",
        "fingerprints": {"a": "1", "b": "2"},
        "inputs": {},
        "secret": set(),
    }
    return resume_plan(folded(events), **{**defaults, **kw})  # type: ignore[arg-type]


def test_resume_plan_for_an_open_run() -> None:
    prior = plan_for(journal(), in_doubt="skip")
    assert prior.in_doubt == "skip" and prior.fresh_steps == set()  # type: ignore[attr-defined]


def test_a_closed_run_is_refused_unless_retry_failed_reopens_a_failed_one() -> None:
    with pytest.raises(RunAlreadyFinished) as info:
        plan_for(journal(closed="succeeded"))
    assert info.value.status is RunStatus.SUCCEEDED
    with pytest.raises(RunAlreadyFinished):
        plan_for(journal(closed="failed"))
    plan_for(journal(closed="failed"), retry_failed=True)  # reopened
    with pytest.raises(RunAlreadyFinished):
        plan_for(journal(closed="succeeded"), retry_failed=True)


def test_missing_environment_and_changes_are_refused_with_what_changed() -> None:
    with pytest.raises(EnvironmentChanged, match="API_TOKEN"):
        plan_for(journal(), env_missing=["API_TOKEN"])
    with pytest.raises(RunChanged) as info:
        plan_for(journal(inputs={"n": 1}), workflow_hash="other", fingerprints={"a": "1", "b": "9"}, inputs={"n": 2})
    assert info.value.changes == [
        "the workflow file changed since the run started",
        "steps whose definition or inputs changed: b",
        "input 'n' was 1, now 2",
    ]
    prior = plan_for(journal(), fingerprints={"a": "1", "b": "9"}, workflow_hash="other", allow_changed=True)
    assert prior.fresh_steps == {"b"}  # type: ignore[attr-defined]


def test_secret_inputs_are_never_compared() -> None:
    plan_for(journal(inputs={"pw": "***inputs.pw***"}), inputs={"pw": "hunter2"}, secret={"pw"})
