"""Which run an invocation continues, and how a resume treats what earlier attempts left: pure decisions.

Nothing here touches a file or a clock. The run lifecycle (:mod:`runner.engine.run`) gathers what it needs
(the workflow's runs, a journal's state) under the workflow lock and asks; the answers are values, and the
refusals are typed errors carrying what the CLI needs to print a command that pastes.

:func:`choose_run`:

==========================================  ===========================================================
what is there                               what happens
==========================================  ===========================================================
``run_id`` named (``resume RUN_ID``)        that run (refused: :class:`RunDamaged` if its first record
                                            cannot be read)
``--new-run``                               a new run
a run whose first record cannot be read     refused: :class:`RunDamaged` (exit 2): it may be an open
(it may be one of this workflow)            run of this workflow; it is never silently replaced
an open run, with ``--resume`` or           the newest open run
``--retry-failed``
an open run, plain                          refused: :class:`UnfinishedRun` (exit 2)
no open run, ``--retry-failed``             the newest run (refused: :class:`NoRunToRetry` if none)
no open run, ``resume WORKFLOW``            refused: :class:`NoUnfinishedRun`
no open run, plain or ``--resume``          a new run
``--retry-failed`` on a run that succeeded  :class:`NothingToRetry` (exit 0)
==========================================  ===========================================================

:func:`resume_plan` refuses a resume that must not proceed as asked (a closed run, unless
``--retry-failed`` on a failed one; environment variables the run read and that are gone; a changed
workflow or changed inputs without ``--allow-changed``) and otherwise says what to do with items in doubt
and which steps start afresh.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from runner.engine.core.state import RunState
from runner.engine.core.vocabulary import RunStatus
from runner.errors import McpRunError, UsageError
from runner.exitcodes import ExitCode

__all__ = [
    "Choice",
    "EnvironmentChanged",
    "NoRunToRetry",
    "NoUnfinishedRun",
    "NothingToRetry",
    "Prior",
    "RunAlreadyFinished",
    "RunChanged",
    "RunDamaged",
    "RunInfo",
    "UnfinishedRun",
    "changed_steps",
    "choose_run",
    "describe_changes",
    "resume_plan",
]

InDoubt = Literal["ask", "rerun", "skip", "accept"]


@dataclass
class Prior:
    """How a resume treats what earlier attempts left: ``in_doubt`` says what to do with items in doubt that
    are not safe to call again and no earlier decision settled ("ask": stop before anything runs; "rerun";
    "skip"; "accept": a :class:`~runner.engine.core.vocabulary.Decision`, journaled before it acts); ``fresh_steps`` are
    steps whose definition changed (their history is ignored)."""

    in_doubt: str = "ask"
    fresh_steps: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What choosing needs of one run: its id, ``closed`` status (None while open), the pid running it, and
    ``damaged``: why its first record cannot be read (then nothing is known of it, not even its workflow)."""

    run_id: str
    closed: RunStatus | None = None
    running_pid: int | None = None
    damaged: str | None = None
    elsewhere: str | None = None  # the workflow file it was started from, when that is not this one's path


@dataclass(frozen=True, slots=True)
class Choice:
    """Continue ``run_id``, or (None) start a new run."""

    run_id: str | None


class UnfinishedRun(UsageError):
    """A plain invocation found an open run of the workflow: it never starts another."""

    def __init__(self, run_id: str, running_pid: int | None, *, elsewhere: str | None = None) -> None:
        status = f"running as process {running_pid}" if running_pid else "interrupted or in doubt"
        # A run of the same workflow (by name:, file name or file) started from another path: say which.
        where = f"; it was started from {elsewhere}" if elsewhere else ""
        super().__init__(f"run {run_id} is unfinished ({status}){where}")
        self.elsewhere = elsewhere
        self.run_id = run_id
        self.running_pid = running_pid


class RunDamaged(UsageError):
    """A run whose journal cannot be read in full (``problem``: ``file:line: what``), so it cannot be
    resumed, and no other run of its workflow starts in its place. ``first``: its first record is the one
    that cannot be read (then the run may be one of any workflow whose runs are kept there). A resume needs
    every record: one it could not read could be the answer to a call, which would then be made again."""

    def __init__(self, run_id: str, problem: str, *, first: bool) -> None:
        if first:
            message = (
                f"run {run_id} cannot be read ({problem}): it may be an unfinished run of this workflow, so "
                "no run of it starts or resumes beside it"
            )
        else:
            message = f"run {run_id} cannot be resumed: its journal is damaged ({problem}); a resume needs every record"
        super().__init__(message)
        self.run_id = run_id
        self.problem = problem
        self.first = first


class NoRunToRetry(UsageError):
    """``--retry-failed`` and the workflow has no run at all."""


class NoUnfinishedRun(UsageError):
    """``resume WORKFLOW`` and no run of it is open; ``newest_failed`` names its newest run if that failed."""

    def __init__(self, message: str, *, newest_failed: str | None) -> None:
        super().__init__(message)
        self.newest_failed = newest_failed


class NothingToRetry(McpRunError):
    """``--retry-failed`` on a run that succeeded: nothing to do (exit 0)."""

    exit_code = ExitCode.OK

    def __init__(self, run_id: str, *, workflow: str | None = None) -> None:
        of = f" of {workflow}" if workflow else ""
        super().__init__(f"run {run_id}{of} succeeded: nothing to retry")
        self.run_id = run_id


class RunAlreadyFinished(UsageError):
    """The run is closed; ``status`` says how (a failed one can be reopened with ``--retry-failed``)."""

    def __init__(self, run_id: str, status: RunStatus) -> None:
        super().__init__(f"run {run_id} already finished ({status.value}); nothing to resume")
        self.run_id = run_id
        self.status = status


class EnvironmentChanged(UsageError):
    """The run read environment variables that are not set now (their values were never journaled)."""

    def __init__(self, run_id: str, names: Sequence[str]) -> None:
        super().__init__(
            f"run {run_id} read the environment variable(s) {', '.join(names)}, which are not set now; set them "
            "again to resume (their values were never written to the journal)"
        )
        self.names = list(names)


class RunChanged(UsageError):
    """The workflow or its inputs changed since the run started, and ``--allow-changed`` was not given."""

    def __init__(self, run_id: str, changes: Sequence[str]) -> None:
        super().__init__(
            f"run {run_id} cannot be resumed as is:\n  - "
            + "\n  - ".join(changes)
            + "\nRun with --allow-changed to re-run the changed steps (and what depends on them), or with "
            "--new-run to start over."
        )
        self.changes = list(changes)


def choose_run(
    runs: Sequence[RunInfo],
    *,
    run_id: str | None = None,
    resume: bool = False,
    new_run: bool = False,
    retry_failed: bool = False,
    start_new: bool = True,
) -> Choice:
    """Which run to continue (see the module's table). ``runs`` are the workflow's runs, oldest first;
    ``start_new`` is False for ``resume WORKFLOW``, which never starts a run."""
    if run_id is not None:
        return _named(runs, run_id, retry_failed)
    if new_run:
        return Choice(None)
    _refuse_damaged(runs)
    open_runs = [r for r in runs if r.closed is None]
    if open_runs:
        newest_open = open_runs[-1]
        if not resume and not retry_failed:
            raise UnfinishedRun(newest_open.run_id, newest_open.running_pid, elsewhere=newest_open.elsewhere)
        return Choice(newest_open.run_id)
    return _none_open(runs, retry_failed=retry_failed, start_new=start_new)


def _named(runs: Sequence[RunInfo], run_id: str, retry_failed: bool) -> Choice:
    """``--run-id``: that run, whatever the others are (one not among ``runs`` is looked for by id later)."""
    named = next((r for r in runs if r.run_id == run_id), RunInfo(run_id))
    if named.damaged is not None:
        raise RunDamaged(named.run_id, named.damaged, first=True)
    return _retry_check(named, retry_failed)


def _refuse_damaged(runs: Sequence[RunInfo]) -> None:
    """A run whose first record cannot be read may be the one to continue: nothing is chosen past it."""
    damaged = [r for r in runs if r.damaged is not None]
    if damaged:
        raise RunDamaged(damaged[-1].run_id, damaged[-1].damaged or "", first=True)


def _none_open(runs: Sequence[RunInfo], *, retry_failed: bool, start_new: bool) -> Choice:
    """Every run is closed (or there is none): reopen the newest to retry, start one, or refuse."""
    if retry_failed:
        if not runs:
            raise NoRunToRetry("no run of this workflow to retry")
        return _retry_check(runs[-1], retry_failed)
    if not start_new:
        failed = runs[-1].run_id if runs and runs[-1].closed is RunStatus.FAILED else None
        raise NoUnfinishedRun("no unfinished run of this workflow", newest_failed=failed)
    return Choice(None)


def _retry_check(run: RunInfo, retry_failed: bool) -> Choice:
    if retry_failed and run.closed is RunStatus.SUCCEEDED:
        raise NothingToRetry(run.run_id)
    return Choice(run.run_id)


def changed_steps(old: Mapping[str, str], new: Mapping[str, str]) -> set[str]:
    return {sid for sid, fp in new.items() if old.get(sid) != fp}


def describe_changes(
    state: RunState, new_hash: str, new_fps: Mapping[str, str], inputs: Mapping[str, Any], secret: set[str]
) -> list[str]:
    """What differs between the run's journal and now. Secret inputs are never compared (their values were
    never written)."""
    changes = []
    if state.workflow_hash != new_hash:
        changes.append("the workflow file changed since the run started")
    changed = changed_steps(state.fingerprints, new_fps)
    if changed:
        changes.append("steps whose definition or inputs changed: " + ", ".join(sorted(changed)))
    old_inputs = state.inputs or {}
    for name in sorted((set(old_inputs) | set(inputs)) - secret):
        old, new = old_inputs.get(name), inputs.get(name)
        if json.dumps(old, sort_keys=True) != json.dumps(new, sort_keys=True):
            changes.append(f"input {name!r} was {json.dumps(old)}, now {json.dumps(new)}")
    return changes


def resume_plan(
    state: RunState,
    *,
    run_id: str,
    workflow_hash: str,
    fingerprints: Mapping[str, str],
    inputs: Mapping[str, Any],
    secret: set[str],
    env_missing: Sequence[str] = (),
    retry_failed: bool = False,
    allow_changed: bool = False,
    in_doubt: InDoubt = "ask",
) -> Prior:
    """How to resume the run whose journal folded into ``state``, or a typed refusal (see the module
    docstring)."""
    if env_missing:
        raise EnvironmentChanged(run_id, env_missing)
    if state.finished and state.status is not None and not (retry_failed and state.status is RunStatus.FAILED):
        raise RunAlreadyFinished(run_id, state.status)
    changes = describe_changes(state, workflow_hash, fingerprints, inputs, secret)
    fresh: set[str] = set()
    if changes:
        if not allow_changed:
            raise RunChanged(run_id, changes)
        fresh = changed_steps(state.fingerprints, fingerprints)
    return Prior(in_doubt=in_doubt, fresh_steps=fresh)
