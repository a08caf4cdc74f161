"""What ``runs`` lists about each run, read cheaply; and pruning old runs.

A run that ended says how in its last record (``run_finished``, ``run_stopped`` or ``run_interrupted``), and
that record carries its item counts. So a run that ended, and that no process holds, is listed from the two
ends of its journal: its first record (workflow, start) and its last (status, exit code, end, counts). Only
a run without such a record (running, crashed, or written by an earlier version) is folded, line by line,
in a state that keeps no results and no log messages: memory grows with its items, never with the size of
its journal.

A run whose journal cannot be read is listed as ``damaged``, with the file, line and reason, and the
listing goes on. What ``runs`` does not read it cannot vouch for: a damaged line in the middle of a journal
that ended is found by ``show``, ``logs`` and a resume, which read every line.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from runner.engine.core.events import Entry, RunFinished, RunInterrupted, RunStarted, RunStopped
from runner.engine.core.state import RunState
from runner.engine.core.vocabulary import RunStatus
from runner.engine.journal.reader import (
    JournalCorrupt,
    closes,
    first_record,
    last_record,
    light_state,
    read_what_can_be_read,
    workflow_named,
)
from runner.engine.journal.rundir import RunDir, is_locked, iter_run_dirs

__all__ = ["COUNTS", "RunSummary", "from_state", "list_runs", "prune", "summarize"]

COUNTS: Final = ("succeeded", "failed", "running", "in_doubt", "reused", "reconciled")
"""The run's items as ``runs`` counts them (see :meth:`runner.engine.core.state.RunState.totals`)."""


@dataclass
class RunSummary:
    """A run as ``runs`` lists it. ``status`` is the last run-level record's (None: no such record: the
    run is running or was interrupted by a crash); ``counts`` its items (``succeeded``, ``failed``,
    ``running``, ``in_doubt``; of the succeeded, ``reused`` and ``reconciled``); ``damaged`` why its journal
    could not be read, if it could not."""

    run_dir: RunDir
    running_pid: int | None
    workflow: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    last_ts: str | None = None
    status: RunStatus | None = None
    exit_code: int | None = None
    finished: bool = False  # closed: every item has a definite answer
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    damaged: JournalCorrupt | None = None

    @property
    def run_id(self) -> str:
        return self.run_dir.run_id

    @property
    def shown_status(self) -> str:
        """The STATUS column: ``damaged``, ``running``, the recorded status, else ``interrupted``."""
        if self.damaged is not None:
            return "damaged"
        if self.running_pid is not None:
            return "running"
        return self.status.value if self.status is not None else "interrupted"


def summarize(run_dir: RunDir) -> RunSummary:
    """One run, read as cheaply as it can be (see the module docstring)."""
    summary = RunSummary(run_dir, is_locked(run_dir.path))
    path = run_dir.journal
    try:
        first = first_record(path)
        last = last_record(path) if first is not None else None
    except JournalCorrupt as exc:
        summary.damaged = exc
        summary.workflow = workflow_named(path)
        return summary
    except OSError as exc:
        summary.damaged = JournalCorrupt(f"cannot be read: {exc.strerror or exc}", file=str(path))
        return summary
    if first is None:
        return summary  # no complete record: the process died writing its first one
    quick = _from_ends(summary, first, last) if summary.running_pid is None else None
    return quick if quick is not None else _folded(summary)


def _from_ends(summary: RunSummary, first: Entry, last: Entry | None) -> RunSummary | None:
    """A run no process holds, listed from its first and last records alone: when the last one ends the
    run and carries its counts (None: the whole journal is read instead)."""
    assert isinstance(first.event, RunStarted)
    ended = last.event if last is not None else None
    if last is None or not isinstance(ended, RunFinished | RunStopped | RunInterrupted) or ended.counts is None:
        return None
    summary.workflow = first.event.workflow
    summary.started_at = first.ts
    summary.ended_at = summary.last_ts = last.ts
    summary.status = ended.status
    summary.exit_code = ended.exit_code
    summary.finished = closes(last)
    summary.counts = {name: ended.counts.get(name, 0) for name in COUNTS}
    return summary


def _folded(summary: RunSummary) -> RunSummary:
    state = light_state()
    path = summary.run_dir.journal
    try:
        damaged = read_what_can_be_read(path, state)
    except OSError as exc:
        damaged = JournalCorrupt(f"cannot be read: {exc.strerror or exc}", file=str(path))
    return from_state(summary.run_dir, summary.running_pid, state, damaged)


def from_state(run_dir: RunDir, running_pid: int | None, state: RunState, damaged: JournalCorrupt | None) -> RunSummary:
    """A run's listing from the fold of its journal (of the lines before ``damaged``, when it is damaged)."""
    return RunSummary(
        run_dir,
        running_pid,
        workflow=state.workflow,
        started_at=state.started_at,
        ended_at=state.ended_at,
        last_ts=state.last_ts,
        status=state.status,
        exit_code=state.exit_code,
        finished=state.finished,
        counts=state.totals(live=running_pid is not None),
        damaged=damaged,
    )


def list_runs(state_dir: Path, workflow: Path | None = None) -> list[RunSummary]:
    """Every run of the state directory (of ``workflow`` only, when given), oldest first."""
    from runner.engine.journal.rundir import runs_of

    run_dirs = runs_of(state_dir, workflow) if workflow is not None else list(iter_run_dirs(state_dir))
    return [summarize(run_dir) for run_dir in run_dirs]


def prune(state_dir: Path, keep: int, *, workflow: Path | None = None) -> list[str]:
    """Remove all but the newest ``keep`` finished runs (of ``workflow``, when given); never a running,
    unfinished or damaged one."""
    finished = [s for s in list_runs(state_dir, workflow) if s.running_pid is None and s.finished and s.damaged is None]
    doomed = finished[: max(0, len(finished) - keep)]
    for summary in doomed:
        shutil.rmtree(summary.run_dir.path)
    return [s.run_id for s in doomed]
