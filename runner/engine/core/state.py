"""The state of a run, folded from its events: the one reader of events.

:class:`RunState` applies :class:`~runner.engine.core.events.Entry`\\ s one at a time. A resume folds the
journal into one, and so do ``runs``, ``show`` and ``logs``; during a run the scheduler applies every event
it emits to a live one, which the views draw and the ``--json`` summary reads. They all count the same way
because there is one way.

Rules, in brief (the journal module's docstring says them at length):

- An item is *succeeded* only with its ``item_succeeded`` record. Its last record being ``item_dispatched``
  makes it *dispatched*: in flight while its run's process lives, in doubt once it is gone
  (``live=False``). ``item_failed`` of an in-doubt kind makes it in doubt; ``skipped-in-doubt`` makes it
  skipped (counted as failed; a later resume does not undo it); any other kind, failed. A ``retrying``
  failure is the end of one attempt; the item goes on (in doubt meanwhile if that attempt's outcome is
  unknown, else *pending*: surely not run).
- ``doubt_decided`` settles the items it names that are still in doubt, and no other: ``skip`` makes them
  skipped (as ``skipped-in-doubt`` does), ``accept`` succeeded (with no result), ``rerun`` leaves them in
  doubt, marked to be called once more (their next ``item_dispatched`` clears the mark).
- ``item_reconciled`` settles an item still in doubt by what its step's reconcile tool said: ``done`` makes it
  succeeded (marked reconciled), ``not-done`` pending (surely not run: called again), ``error`` leaves it in
  doubt.
- ``item_succeeded`` with ``reused_from`` (a cache hit: the result came from an earlier run's journal) counts
  the item as reused, as ``step_started.reused`` counts those an earlier attempt of the same run left.
- A run is *closed* only when its last run-level record is ``run_finished`` with a closed status;
  ``run_stopped``, ``run_interrupted``, or no record at all (a crash) leave it open. ``run_resumed``
  reopens it.
- A step skipped (``step_skipped``) forgets the items an earlier attempt left failed or pending: they no
  longer say how the run ends. It keeps those that succeeded, are in doubt, or were skipped in doubt.
- Counts per step are kept as items change, so a view can ask for them at any rate.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from runner.engine.core.events import (
    JOURNAL_FORMAT,
    DoubtDecided,
    Entry,
    ItemDispatched,
    ItemFailed,
    ItemReconciled,
    ItemSucceeded,
    LogMessage,
    ProgressNoted,
    RunFinished,
    RunInterrupted,
    RunResumed,
    RunStarted,
    RunStopped,
    ServerThrottled,
    SessionFailed,
    SessionLost,
    SessionOpened,
    SessionRetrying,
    StepFinished,
    StepSkipped,
    StepStarted,
    TaskCreated,
    TaskUpdated,
    task_words,
)
from runner.engine.core.vocabulary import Decision, FailureKind, ItemStatus, RunStatus, SkipCause, StepStatus, Verdict

__all__ = ["CallProgress", "ItemState", "RunState", "SessionState", "StepCounts", "StepState", "fold"]

SKIPPED_IN_DOUBT: Final = "in doubt; skipped by --skip-in-doubt"
ACCEPTED_IN_DOUBT: Final = "was in doubt; recorded as done by --accept-in-doubt"
RECONCILED_NOT_DONE: Final = "was in doubt; its reconcile tool said it did not happen: it is called again"
LOG_KEEP: Final = 10_000  # log messages a state keeps (the newest); the journal has them all


@dataclass(slots=True)
class CallProgress:
    """The last progress notification of a call in flight (``seq`` orders them)."""

    progress: float | None = None
    total: float | None = None
    message: str | None = None
    seq: int = 0


@dataclass(slots=True)
class ItemState:
    key: str
    index: int | None = None
    status: ItemStatus = ItemStatus.DISPATCHED
    kind: FailureKind | None = None
    error: str | None = None
    result: dict[str, Any] | None = None
    dispatched_at: str | None = None
    request_id: Any = None
    attempts: int = 0
    task_id: str | None = None  # the server took its last attempt as this task, whose result is not yet recorded
    reused_from: str | None = None  # its result was taken from this earlier run's journal (``cache:``)
    reconciled: bool = False  # succeeded because its step's reconcile tool said its call happened
    decided: Decision | None = None
    """The decision about its last doubt: ``accept`` (succeeded, no result) and ``skip`` (skipped) settled it;
    ``rerun`` is still to be carried out (it is in doubt until its next dispatch, which clears this)."""

    @property
    def collectable(self) -> bool:
        """Dispatched, taken as a task, no result recorded: a resume polls the task for its result instead of
        putting the item in doubt."""
        return self.task_id is not None and self.status is ItemStatus.DISPATCHED

    @property
    def in_doubt(self) -> bool:
        """No definite answer (dispatched without a result, or ended with the outcome unknown). For a run
        whose process still lives, dispatched items are in flight instead: see :meth:`StepState.counts`."""
        return self.status is ItemStatus.IN_DOUBT or self.status is ItemStatus.DISPATCHED


@dataclass(frozen=True, slots=True)
class StepCounts:
    """A step's items by where they stand. ``running``: dispatched, in a run whose process lives (else they
    are counted in ``in_doubt``); ``failed`` includes items skipped in doubt; ``reused``: results the last
    attempt took from earlier ones."""

    total: int
    succeeded: int
    failed: int
    in_doubt: int
    running: int
    skipped: int
    reused: int

    @property
    def done(self) -> int:
        return self.succeeded + self.failed + self.in_doubt

    def as_dict(self) -> dict[str, int]:
        return {
            "total": self.total,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "in_doubt": self.in_doubt,
            "skipped": self.skipped,
            "reused": self.reused,
        }


@dataclass(slots=True)
class StepState:
    id: str
    status: StepStatus = StepStatus.PENDING
    fan_out: bool = False
    total: int = 0  # items in its last attempt (1 for a plain step)
    reused: int = 0
    reconciled: int = 0  # items its reconcile tool settled as done in its last attempt
    reason: str | None = None  # why it was skipped, or why it failed as a whole
    kind: FailureKind | None = None  # how it failed as a whole
    cause: SkipCause | None = None  # which kind of why it was skipped (None for journals that do not say)
    started_at: str | None = None
    finished_at: str | None = None
    items: dict[str, ItemState] = field(default_factory=dict)
    calls: dict[str, CallProgress] = field(default_factory=dict)  # in flight now (live state only)
    by_status: Counter[ItemStatus] = field(default_factory=Counter)

    def counts(self, *, live: bool = True) -> StepCounts:
        n = self.by_status
        dispatched = n[ItemStatus.DISPATCHED]
        running = dispatched if live else 0
        total = max(self.total, len(self.items))
        return StepCounts(
            total=total,
            succeeded=n[ItemStatus.SUCCEEDED],
            failed=n[ItemStatus.FAILED] + n[ItemStatus.SKIPPED],
            in_doubt=n[ItemStatus.IN_DOUBT] + (dispatched - running),
            running=running,
            skipped=n[ItemStatus.SKIPPED],
            reused=self.reused,
        )

    def end(self, status: StepStatus, reason: str | None, at: str, *, cause: SkipCause | None = None) -> None:
        """The step ended (skipped or finished) at ``at``; its failure kind is cleared (the caller sets a
        finished step's own)."""
        self.status = status
        self.reason = reason
        self.cause = cause
        self.kind = None
        self.finished_at = at

    def latest_call(self) -> tuple[str, CallProgress] | None:
        """The call in flight whose progress was reported last (the one worth showing)."""
        best: tuple[str, CallProgress] | None = None
        for key, call in self.calls.items():
            if best is None or call.seq > best[1].seq:
                best = (key, call)
        return best


@dataclass(slots=True)
class SessionState:
    server: str
    status: str = "open"  # open, lost (reconnecting), failed
    protocol_version: str | None = None
    server_info: dict[str, Any] = field(default_factory=dict)
    reconnects: int = 0
    error: str | None = None
    kind: FailureKind | None = None
    throttled: int = 0  # answers of 429/503 (server_throttled)
    slowed: int = 0  # of which lowered the pace
    paused_s: float = 0.0  # the pauses asked, summed (overlapping ones each counted)
    limit: int | None = None  # the in-flight limit after the last throttle
    rate: float | None = None  # and the pace, calls per second (None: unpaced)


@dataclass(slots=True)
class RunState:
    """What the events of a run say, so far. ``keep_results``: the steps whose results are kept in memory
    (None: all); a 100,000-item fan-out nobody reads needs only its statuses."""

    keep_results: set[str] | None = None
    run_id: str | None = None
    workflow: str | None = None
    workflow_hash: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    fingerprints: dict[str, str] = field(default_factory=dict)
    env_names: list[str] = field(default_factory=list)
    journal_format: int = JOURNAL_FORMAT  # as run_started says: a format-1 run keys items by their full hash
    steps: dict[str, StepState] = field(default_factory=dict)
    sessions: dict[str, SessionState] = field(default_factory=dict)
    logs: deque[Entry] = field(default_factory=lambda: deque(maxlen=LOG_KEEP))
    started_at: str | None = None
    ended_at: str | None = None
    status: RunStatus | None = None  # as the last run-level record says; None while it runs (or crashed)
    ended_by: str | None = None  # run_finished, run_stopped, run_interrupted
    exit_code: int | None = None
    outputs: Any = None
    pids: list[int] = field(default_factory=list)
    attempts: int = 0  # run_started and each run_resumed
    traceparents: list[str] = field(default_factory=list)  # the traced attempts' run spans (runner.engine.telemetry)
    retry_failed: bool = False  # the last attempt was a --retry-failed
    last_seq: int = 0
    events: int = 0
    last_ts: str | None = None

    # -- reading -----------------------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """Closed: every item has a definite answer; a resume has nothing to do (``--retry-failed`` may
        reopen a failed run)."""
        return self.ended_by == "run_finished" and self.status is not None and self.status.closed

    def step(self, sid: str) -> StepState:
        state = self.steps.get(sid)
        if state is None:
            state = self.steps[sid] = StepState(sid)
        return state

    def item(self, sid: str, key: str) -> ItemState | None:
        state = self.steps.get(sid)
        return state.items.get(key) if state is not None else None

    def in_doubt(self) -> list[tuple[str, ItemState]]:
        """Every (step, item) without a definite answer, step by step."""
        return [(sid, item) for sid, step in self.steps.items() for item in step.items.values() if item.in_doubt]

    def items_in(self, *statuses: ItemStatus) -> Iterator[tuple[str, ItemState]]:
        for sid, step in self.steps.items():
            for item in step.items.values():
                if item.status in statuses:
                    yield sid, item

    def in_flight(self) -> int:
        return sum(len(step.calls) for step in self.steps.values())

    def totals(self, *, live: bool) -> dict[str, int]:
        """The run's items, all steps together, as ``runs`` lists them: ``succeeded``, ``failed``,
        ``running`` (dispatched, while the run's process lives: ``live``) and ``in_doubt``; and those its last
        attempts settled without calling them: ``reused`` (results taken from earlier attempts, or by
        ``cache:`` from an earlier run) and ``reconciled`` (their reconcile tool said the call happened)."""
        total = {"succeeded": 0, "failed": 0, "running": 0, "in_doubt": 0, "reused": 0, "reconciled": 0}
        for step in self.steps.values():
            counts = step.counts(live=live)
            total["succeeded"] += counts.succeeded
            total["failed"] += counts.failed
            total["running"] += counts.running
            total["in_doubt"] += counts.in_doubt
            total["reused"] += step.reused
            total["reconciled"] += step.reconciled
        return total

    def end_counts(self) -> dict[str, int]:
        """The counts a run's end record carries (``runs`` reads them there, its process gone): the
        :meth:`totals` of a process that no longer runs, without ``running``."""
        counts = self.totals(live=False)
        del counts["running"]
        return counts

    # -- applying events -----------------------------------------------------------------------------------

    def apply(self, entry: Entry) -> StepState | None:
        """Fold one event; returns the step it changed, if any."""
        self.events += 1
        if entry.seq > self.last_seq:
            self.last_seq = entry.seq
        self.last_ts = entry.ts
        event = entry.event
        handler = _HANDLERS.get(type(event))
        return handler(self, entry) if handler is not None else None

    def _set_status(self, step: StepState, item: ItemState, status: ItemStatus) -> None:
        if item.status is not status:
            step.by_status[item.status] -= 1
            step.by_status[status] += 1
            item.status = status

    def _item(self, sid: str, key: str, index: int | None) -> tuple[StepState, ItemState]:
        step = self.step(sid)
        item = step.items.get(key)
        if item is None:
            item = step.items[key] = ItemState(key)
            step.by_status[item.status] += 1
        if index is not None:
            item.index = index
        return step, item

    def _dispatched(self, entry: Entry) -> StepState:
        event = entry.event
        assert isinstance(event, ItemDispatched)
        step, item = self._item(event.step, event.item, event.index)
        self._set_status(step, item, ItemStatus.DISPATCHED)
        item.dispatched_at = entry.ts
        item.request_id = event.request_id
        item.attempts += 1
        item.result = item.error = item.kind = item.task_id = item.decided = item.reused_from = None
        step.calls[event.item] = CallProgress()
        return step

    def _task_created(self, entry: Entry) -> StepState:
        event = entry.event
        assert isinstance(event, TaskCreated)
        step, item = self._item(event.step, event.item, event.index)
        item.task_id = event.task_id
        return step

    def _task_updated(self, entry: Entry) -> StepState | None:
        event = entry.event
        assert isinstance(event, TaskUpdated)
        step = self.steps.get(event.step)
        call = step.calls.get(event.item) if step is not None else None
        if call is None:
            return None
        call.message = task_words(event.status, event.message)
        call.seq = entry.seq
        return step

    def _succeeded(self, entry: Entry) -> StepState:
        event = entry.event
        assert isinstance(event, ItemSucceeded)
        step, item = self._item(event.step, event.item, event.index)
        self._set_status(step, item, ItemStatus.SUCCEEDED)
        item.error = item.kind = item.task_id = None
        item.result = event.result if self._keeps(event.step) else None
        item.reused_from = event.reused_from
        if event.reused_from is not None:
            step.reused += 1  # a cache hit: reused, as a result an earlier attempt left is
        step.calls.pop(event.item, None)
        return step

    def _failed(self, entry: Entry) -> StepState:
        event = entry.event
        assert isinstance(event, ItemFailed)
        step, item = self._item(event.step, event.item, event.index)
        kind = event.kind
        item.kind = kind
        item.error = event.error
        item.task_id = None
        if event.retrying:
            # One attempt ended; the next one journals its own dispatch. Until then the call is not in
            # flight, and its outcome so far is what this attempt left.
            status = ItemStatus.IN_DOUBT if kind is not None and kind.in_doubt else ItemStatus.PENDING
        elif kind is FailureKind.SKIPPED_IN_DOUBT:
            status = ItemStatus.SKIPPED
        elif kind is not None and kind.in_doubt:
            status = ItemStatus.IN_DOUBT
        else:
            status = ItemStatus.FAILED
        self._set_status(step, item, status)
        item.result = event.result if kind is FailureKind.TOOL_ERROR and self._keeps(event.step) else None
        step.calls.pop(event.item, None)
        return step

    def _doubt_decided(self, entry: Entry) -> StepState | None:
        event = entry.event
        assert isinstance(event, DoubtDecided)
        decision = event.decision
        if decision is None:
            return None  # a decision of a later version: nothing this one can act on
        step = self.steps.get(event.step)
        if step is None:
            return None
        for key in event.keys:
            item = step.items.get(key)
            if item is None or not item.in_doubt:
                continue  # settled since (or never in doubt): a decision acts only on the doubt it names
            item.decided = decision
            if decision is Decision.SKIP:
                self._set_status(step, item, ItemStatus.SKIPPED)
                item.kind, item.error = FailureKind.SKIPPED_IN_DOUBT, SKIPPED_IN_DOUBT
            elif decision is Decision.ACCEPT:
                self._set_status(step, item, ItemStatus.SUCCEEDED)
                item.kind = item.error = item.result = item.task_id = None
            step.calls.pop(key, None)
        return step

    def _reconciled(self, entry: Entry) -> StepState | None:
        event = entry.event
        assert isinstance(event, ItemReconciled)
        step = self.steps.get(event.step)
        item = step.items.get(event.item) if step is not None else None
        if step is None or item is None or not item.in_doubt:
            return None  # a verdict acts only on the doubt it was asked about
        if event.verdict is Verdict.DONE:
            self._set_status(step, item, ItemStatus.SUCCEEDED)
            item.kind = item.error = item.task_id = None
            item.result = event.result if self._keeps(event.step) else None
            item.reconciled = True
            step.reconciled += 1
        elif event.verdict is Verdict.NOT_DONE:
            # Surely not run: pending, as an attempt that was never sent (the next attempt calls it).
            self._set_status(step, item, ItemStatus.PENDING)
            item.kind, item.error = FailureKind.NOT_SENT, RECONCILED_NOT_DONE
        step.calls.pop(event.item, None)
        return step

    def _keeps(self, sid: str) -> bool:
        return self.keep_results is None or sid in self.keep_results

    def _progress(self, entry: Entry) -> StepState | None:
        event = entry.event
        assert isinstance(event, ProgressNoted)
        step = self.steps.get(event.step)
        call = step.calls.get(event.item) if step is not None else None
        if call is None:
            return None  # a late notification for a call already finished
        call.progress = event.progress
        call.total = event.total
        if event.message:
            call.message = event.message
        call.seq = entry.seq
        return step

    def _log(self, entry: Entry) -> None:
        self.logs.append(entry)

    def _step_started(self, entry: Entry) -> StepState:
        event = entry.event
        assert isinstance(event, StepStarted)
        step = self.step(event.step)
        if event.fresh:  # changed since its earlier attempts: their items no longer count
            step.items.clear()
            step.by_status.clear()
        step.status = StepStatus.RUNNING
        step.fan_out = event.items is not None
        step.total = event.items if event.items is not None else 1
        step.reused = event.reused or 0
        step.reconciled = 0
        step.reason = None
        step.kind = None
        step.cause = None
        step.started_at = entry.ts
        step.finished_at = None
        return step

    def _step_skipped(self, entry: Entry) -> StepState:
        event = entry.event
        assert isinstance(event, StepSkipped)
        step = self.step(event.step)
        # A failure of an earlier attempt (its kind) no longer says how this step ended.
        step.end(StepStatus.SKIPPED, event.reason, entry.ts, cause=event.cause)
        # Nor do the calls of an earlier attempt that failed (a `failure()` step, skipped by a --retry-failed
        # that succeeded): they say nothing a later attempt needs. Succeeded calls stay (a later attempt that
        # runs the step reuses them), and so do calls in doubt and those skipped in doubt (never called again).
        for key in [key for key, item in step.items.items() if item.status in _FORGOTTEN_ON_SKIP]:
            step.by_status[step.items.pop(key).status] -= 1
        return step

    def _step_finished(self, entry: Entry) -> StepState:
        event = entry.event
        assert isinstance(event, StepFinished)
        step = self.step(event.step)
        step.end(event.status, event.error, entry.ts)
        step.kind = event.kind
        step.calls.clear()
        if step.started_at is None:  # failed before it started (its items could not be listed)
            step.started_at = entry.ts
        return step

    def _session(self, entry: Entry) -> None:
        event = entry.event
        if isinstance(event, SessionOpened):
            session = self.sessions.setdefault(event.server, SessionState(event.server))
            session.status = "open"
            session.protocol_version = event.protocol_version
            session.server_info = event.server_info
            session.reconnects = event.reconnects or session.reconnects
            session.error = None
        elif isinstance(event, SessionLost | SessionRetrying):
            session = self.sessions.setdefault(event.server, SessionState(event.server))
            session.status = "lost"
            session.error = event.error
        elif isinstance(event, SessionFailed):
            session = self.sessions.setdefault(event.server, SessionState(event.server))
            session.status = "failed"
            session.error = event.error
            session.kind = event.kind

    def _throttled(self, entry: Entry) -> None:
        event = entry.event
        assert isinstance(event, ServerThrottled)
        session = self.sessions.setdefault(event.server, SessionState(event.server))
        session.throttled += 1
        if event.cut:
            session.slowed += 1
            session.paused_s = round(session.paused_s + event.pause_s, 3)
            session.limit = event.limit
            session.rate = event.rate

    def _run(self, entry: Entry) -> None:
        event = entry.event
        if isinstance(event, RunStarted):
            self.run_id = event.run_id
            self.workflow = event.workflow
            self.workflow_hash = event.workflow_hash
            self.inputs = event.inputs
            self.fingerprints = event.fingerprints
            self.env_names = event.env
            self.journal_format = event.journal or 1
            self.started_at = entry.ts
            self.pids.append(event.pid)
            self.attempts += 1
            if event.traceparent is not None:
                self.traceparents.append(event.traceparent)
        elif isinstance(event, RunResumed):
            self.status = self.ended_by = self.exit_code = self.ended_at = None
            self.sessions.clear()  # a new attempt opens its sessions afresh
            self.fingerprints = event.fingerprints
            self.retry_failed = bool(event.retry_failed)
            self.pids.append(event.pid)
            self.attempts += 1
            if event.traceparent is not None:
                self.traceparents.append(event.traceparent)
        elif isinstance(event, RunFinished | RunStopped | RunInterrupted):
            self.status = event.status
            self.ended_by = event.type
            self.exit_code = event.exit_code
            self.ended_at = entry.ts
            if not isinstance(event, RunInterrupted):
                self.outputs = event.outputs


_FORGOTTEN_ON_SKIP: Final = (ItemStatus.FAILED, ItemStatus.PENDING)


_HANDLERS: Final[dict[type, Any]] = {
    ItemDispatched: RunState._dispatched,
    ItemSucceeded: RunState._succeeded,
    ItemFailed: RunState._failed,
    DoubtDecided: RunState._doubt_decided,
    ItemReconciled: RunState._reconciled,
    ProgressNoted: RunState._progress,
    TaskCreated: RunState._task_created,
    TaskUpdated: RunState._task_updated,
    LogMessage: RunState._log,
    StepStarted: RunState._step_started,
    StepSkipped: RunState._step_skipped,
    StepFinished: RunState._step_finished,
    SessionOpened: RunState._session,
    SessionLost: RunState._session,
    SessionRetrying: RunState._session,
    SessionFailed: RunState._session,
    ServerThrottled: RunState._throttled,
    RunStarted: RunState._run,
    RunResumed: RunState._run,
    RunFinished: RunState._run,
    RunStopped: RunState._run,
    RunInterrupted: RunState._run,
}


def fold(entries: Iterable[Entry], *, keep_results: set[str] | None = None) -> RunState:
    """A :class:`RunState` with every entry applied, in order."""
    state = RunState(keep_results=keep_results)
    for entry in entries:
        state.apply(entry)
    return state
