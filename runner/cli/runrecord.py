"""A run as plain data, read from its journal alone (no server is contacted): the rows of ``mcp-run runs``
(:func:`run_record`) and everything ``mcp-run show`` prints (:func:`show_record`), the same for ``--json``
and text.

A run's status is what its journal says (``succeeded``, ``failed``, ``in-doubt``, ``interrupted`` by a signal)
unless the journal has no final record: then it is ``running`` while a process holds the run's lock, and
``interrupted`` (the process died) when none does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.engine.core.state import ItemState, RunState, StepState
    from runner.engine.journal.listing import RunSummary
    from runner.engine.journal.reader import JournalCorrupt
    from runner.engine.journal.rundir import RunDir

__all__ = ["RECORD_VERSION", "Loaded", "damage_record", "load", "run_record", "show_record"]

RECORD_VERSION = 1


@dataclass
class Loaded:
    """A run directory read once for ``show``: its listing (:class:`~runner.engine.journal.listing.RunSummary`) and
    its state, the fold of every line of its journal that could be read (up to the damaged one, if any:
    ``summary.damaged`` says where)."""

    summary: RunSummary
    state: RunState

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    @property
    def running_pid(self) -> int | None:
        return self.summary.running_pid


def load(run_dir: RunDir) -> Loaded:
    """Fold the run's journal line by line (results are not kept; ``show`` prints none), up to a damaged line."""
    from runner.engine.core.state import RunState
    from runner.engine.journal.listing import from_state
    from runner.engine.journal.reader import JournalCorrupt, read_what_can_be_read
    from runner.engine.journal.rundir import is_locked

    pid = is_locked(run_dir.path)
    state = RunState(keep_results=set())
    damaged = run_dir.damage()  # a first record that is not run_started: nothing of the run can be known
    if damaged is None:
        try:
            damaged = read_what_can_be_read(run_dir.journal, state)
        except OSError as exc:
            damaged = JournalCorrupt(f"cannot be read: {exc.strerror or exc}", file=str(run_dir.journal))
    return Loaded(from_state(run_dir, pid, state, damaged), state)


def _ts(value: Any) -> float | None:
    from runner.view.text import ts_seconds

    return ts_seconds(value) if value else None


def _duration(run: RunSummary, now: float) -> float | None:
    start = _ts(run.started_at)
    if start is None:
        return None
    if run.running_pid is not None:
        return max(now - start, 0.0)
    end = _ts(run.last_ts)
    return max(end - start, 0.0) if end is not None else None


def _step_counts(step: StepState, live: bool) -> dict[str, int]:
    """A step's items by what is known of them: ``running`` are dispatched calls of a live run (a process
    holds the run's lock); once no process does, they are ``in_doubt``. An item a resume skipped because it
    was in doubt (``--skip-in-doubt``) has been decided: it counts as failed, as the run's summary counts it.
    Of the succeeded, ``reused`` were taken from earlier attempts or runs, ``reconciled`` settled by asking."""
    counts = step.counts(live=live)
    return {
        "succeeded": counts.succeeded,
        "failed": counts.failed,
        "running": counts.running,
        "in_doubt": counts.in_doubt,
        "reused": counts.reused,
        "reconciled": step.reconciled,
    }


def damage_record(damaged: JournalCorrupt) -> dict[str, Any]:
    """Where a journal stopped being readable: ``file``, ``line`` (None for the journal as a whole),
    ``field`` (when one is at fault) and ``reason``."""
    return {"file": damaged.file, "line": damaged.line, "field": damaged.path, "reason": damaged.message}


def run_record(run: RunSummary | Loaded, now: float) -> dict[str, Any]:
    """One run as a row of ``mcp-run runs`` (and the head of ``show``)."""
    summary = run.summary if isinstance(run, Loaded) else run
    duration = _duration(summary, now)
    return {
        "run_id": summary.run_id,
        "workflow": summary.workflow,
        "status": summary.shown_status,
        "exit_code": summary.exit_code,
        "started": summary.started_at,
        "finished": summary.ended_at,
        "duration_s": round(duration, 3) if duration is not None else None,
        "pid": summary.running_pid,
        "items": dict(summary.counts),
        **({"damaged": damage_record(summary.damaged)} if summary.damaged is not None else {}),
    }


def show_record(run: Loaded, now: float) -> dict[str, Any]:
    """Everything ``mcp-run show`` prints: steps, failures with their error text, in-doubt items, logs. All of
    it is read off the run's state: the same counts as ``runs`` and the run's summary."""
    from runner.engine.core.events import encode
    from runner.engine.core.vocabulary import Decision, ItemStatus

    state = run.state
    live = run.running_pid is not None
    running: list[dict[str, Any]] = []
    in_doubt: list[dict[str, Any]] = []
    for sid, item in state.in_doubt():
        (running if live and item.status is ItemStatus.DISPATCHED else in_doubt).append(_doubt_entry(sid, item))
    accepted = [
        {"step": sid, "item": item.key, "index": item.index, "dispatched_at": item.dispatched_at}
        for sid, item in state.items_in(ItemStatus.SUCCEEDED)
        if item.decided is Decision.ACCEPT
    ]
    logs = [{k: v for k, v in encode(e).items() if k != "seq"} for e in state.logs]
    return {
        "version": RECORD_VERSION,
        **run_record(run, now),
        "inputs": state.inputs,
        "pids": state.pids,
        "steps": {sid: _step_entry(step, live) for sid, step in state.steps.items()},
        "failures": _failures(state),
        "throttled": _throttled(state),
        "running": running,
        "in_doubt": in_doubt,
        "accepted": accepted,
        "logs": logs,
        "outputs": state.outputs,
    }


def _step_entry(step: StepState, live: bool) -> dict[str, Any]:
    """A step as ``show`` lists it: ``unfinished`` when it was running and no process runs it any more."""
    from runner.engine.core.vocabulary import StepStatus

    status = step.status.value
    if step.status is StepStatus.RUNNING and not live:
        status = "unfinished"
    entry: dict[str, Any] = {"status": status}
    if step.status is StepStatus.SKIPPED and step.reason:
        entry["reason"] = step.reason
    if step.fan_out:
        entry["items"] = step.total
    if step.kind is not None and step.reason:
        entry["error"] = step.reason
    entry.update(_step_counts(step, live))
    return entry


def _failures(state: RunState) -> list[dict[str, Any]]:
    """The servers that failed in the latest attempt (a resume starts its sessions afresh), the steps that
    failed as a whole, and the items that failed or were skipped in doubt."""
    from runner.engine.core.vocabulary import ItemStatus

    failures: list[dict[str, Any]] = [
        {"server": session.server, "kind": session.kind.value if session.kind else None, "error": session.error}
        for session in state.sessions.values()
        if session.status == "failed"
    ]
    failures += [
        {"step": sid, "item": None, "kind": step.kind.value, "error": step.reason}
        for sid, step in state.steps.items()
        if step.kind is not None and step.reason
    ]
    for sid, item in state.items_in(ItemStatus.FAILED, ItemStatus.SKIPPED):
        kind = item.kind.value if item.kind else None
        failures.append({"step": sid, "item": item.key, "index": item.index, "kind": kind, "error": item.error})
    return failures


def _throttled(state: RunState) -> dict[str, dict[str, Any]]:
    """Per server that refused calls for now (429/503), from its ``server_throttled`` records: how many answers,
    how many lowered the pace, the pauses asked (seconds, summed) and the pace it was left at."""
    return {
        session.server: {
            "refused": session.throttled,
            "slowed": session.slowed,
            "paused_s": session.paused_s,
            "limit": session.limit,
            "rate": session.rate,
        }
        for session in state.sessions.values()
        if session.throttled
    }


def _doubt_entry(sid: str, item: ItemState) -> dict[str, Any]:
    return {
        "step": sid,
        "item": item.key,
        "index": item.index,
        "kind": item.kind.value if item.kind else None,
        "error": item.error,
        "dispatched_at": item.dispatched_at,
        "attempts": item.attempts,
        "request_id": item.request_id,
    }
