"""What a report shows of a run, built from its journal's events in one pass: :func:`build`.

The statuses are the fold's (:class:`~runner.engine.core.state.RunState`, the one reader of events), so a
report counts as ``show`` and the run's summary do; what the fold does not keep (when each call started and
ended, on which server, how many attempts were retried) is gathered alongside it. Calls are aggregated into
time buckets per server (:mod:`runner.report.lanes`): a 100,000-item run is as small to draw as a 10-item one.

Text comes as the journal holds it, read "as shown" (secrets are placeholders: ``***env.TOKEN***``); a renderer
escapes it for its format. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from runner.engine.core.events import (
    JOURNAL_FORMAT,
    Entry,
    ItemDispatched,
    ItemFailed,
    ItemReconciled,
    ItemSucceeded,
    RunResumed,
    RunStarted,
    SessionFailed,
    SessionLost,
    SessionOpened,
    SessionRetrying,
)
from runner.engine.core.state import ItemState, RunState
from runner.engine.core.vocabulary import Decision, ItemStatus, StepStatus, Verdict
from runner.report.lanes import CallSpan, Lane, Outcome, WaitSpan, lanes_of
from runner.view.text import ts_seconds

__all__ = ["FailureGroup", "ItemRow", "RunReportModel", "ServerInfo", "StepRow", "build"]

GROUP_TEXT: Final = 200  # failures are grouped by the first line of their error, cut to this many characters


@dataclass(slots=True)  # not frozen: a frozen dataclass sets each field through object.__setattr__ (100,000 rows)
class ItemRow:
    """One item (or the one call of a plain step, ``key`` its step id): ``status`` is ``succeeded``,
    ``failed``, ``skipped`` (in doubt, skipped by a decision: counted as failed), ``in-doubt``, ``running`` (a
    live run's call in flight), or ``pending``; ``start_s``/``duration_s``: from its first dispatch to its last
    answer, in seconds from the run's start (None when it was never dispatched or never answered)."""

    step: str
    key: str
    index: int | None
    status: str
    kind: str | None
    error: str | None
    attempts: int
    server: str | None
    tool: str | None
    start_s: float | None
    duration_s: float | None
    accepted: bool = False  # was in doubt, recorded as done by --accept-in-doubt

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "skipped")


@dataclass(frozen=True, slots=True)
class StepRow:
    """One step: its status and its items' counts (of the succeeded, ``reused`` were taken from earlier attempts or
    runs, ``reconciled`` settled by its reconcile tool); ``reason``: why it was skipped, or its own error."""

    id: str
    status: str
    fan_out: bool
    total: int
    succeeded: int
    failed: int
    in_doubt: int
    running: int
    reused: int
    reconciled: int
    server: str | None
    tool: str | None
    reason: str | None
    kind: str | None
    start_s: float | None
    duration_s: float | None


@dataclass(frozen=True, slots=True)
class FailureGroup:
    """Failures with the same kind and error (its first line): ``items`` as (step, key), key None for a step
    that failed as a whole; ``server`` for a server that could not be reached."""

    kind: str | None
    error: str
    items: tuple[tuple[str, str | None], ...]
    server: str | None = None


@dataclass(frozen=True, slots=True)
class ServerInfo:
    name: str
    protocol_version: str | None
    server_name: str | None
    server_version: str | None
    reconnects: int
    failed: str | None  # its error, when the last attempt gave up on it
    throttled: int = 0  # answers of 429/503 (server_throttled records)
    paused_s: float = 0.0  # the pauses they asked, summed


@dataclass(frozen=True, slots=True)
class RunReportModel:
    run_id: str | None
    workflow: str | None
    status: str
    exit_code: int | None
    started_at: str | None
    ended_at: str | None
    duration_s: float
    attempts: int
    inputs: dict[str, Any]
    outputs: Any
    journal_format: int
    mcp_run_version: str
    steps: tuple[StepRow, ...]
    items: tuple[ItemRow, ...]
    failures: tuple[FailureGroup, ...]
    in_doubt: tuple[ItemRow, ...]
    decisions: tuple[str, ...]  # the commands that decide about the items in doubt (one per decision)
    servers: tuple[ServerInfo, ...]
    lanes: tuple[Lane, ...]
    bucket_s: float
    edges: dict[str, tuple[str, ...]] = field(default_factory=dict)  # step -> the steps it depends on

    @property
    def failed_items(self) -> list[ItemRow]:
        return [item for item in self.items if item.failed]

    def counts(self) -> dict[str, int]:
        total = {"items": 0, "succeeded": 0, "failed": 0, "in_doubt": 0, "running": 0}
        for step in self.steps:
            total["items"] += step.total
            total["succeeded"] += step.succeeded
            total["failed"] += step.failed
            total["in_doubt"] += step.in_doubt
            total["running"] += step.running
        return total


@dataclass(slots=True)
class _Timing:
    first: float | None = None
    last_end: float | None = None
    open_since: float | None = None  # the attempt in flight (no answer yet)
    waiting_since: float | None = None  # the failed attempt's answer, when it is to be retried
    server: str | None = None
    tool: str | None = None


@dataclass(slots=True)
class _Gather:
    """What the fold does not keep, gathered from the same events."""

    times: dict[tuple[str, str], _Timing] = field(default_factory=dict)
    spans: list[CallSpan] = field(default_factory=list)
    waits: list[WaitSpan] = field(default_factory=list)
    step_server: dict[str, tuple[str, str]] = field(default_factory=dict)
    sessions: dict[str, SessionOpened] = field(default_factory=dict)
    reconnects: dict[str, int] = field(default_factory=dict)
    doubted: dict[tuple[str, str], int] = field(default_factory=dict)  # an item's last in-doubt span (its index)
    first_text: str | None = None  # the first and last entries' ts
    last_text: str | None = None

    def in_doubt(self, key: tuple[str, str], server: str, start: float, end: float) -> None:
        self.doubted[key] = len(self.spans)
        self.spans.append(CallSpan(server, start, end, Outcome.IN_DOUBT))

    def take(self, entry: Entry) -> None:
        event = entry.event
        kind = type(event)
        if self.first_text is None:
            self.first_text = entry.ts
        before = self.last_text  # the previous entry's ts: a killed attempt's last sign of life
        self.last_text = entry.ts
        if kind is ItemDispatched:
            assert isinstance(event, ItemDispatched)
            now = ts_seconds(entry.ts)
            if now is None:
                return
            timing = self.times.get((event.step, event.item))
            if timing is None:
                timing = self.times[(event.step, event.item)] = _Timing(first=now)
            if timing.open_since is not None:  # dispatched again with no answer: that attempt is in doubt
                self.in_doubt((event.step, event.item), event.server, timing.open_since, now)
            if timing.waiting_since is not None and timing.server is not None:  # the retry's wait ends
                self.waits.append(WaitSpan(timing.server, timing.waiting_since, now))
                timing.waiting_since = None
            timing.open_since, timing.server, timing.tool = now, event.server, event.tool
            if event.step not in self.step_server:
                self.step_server[event.step] = (event.server, event.tool)
        elif kind is ItemSucceeded or kind is ItemFailed:
            assert isinstance(event, ItemSucceeded | ItemFailed)
            timing = self.times.get((event.step, event.item))
            if timing is None or timing.open_since is None or timing.server is None:
                return  # an item that failed before it was sent (a template error): no call
            now = ts_seconds(entry.ts)
            if now is None:
                return
            if isinstance(event, ItemSucceeded):
                outcome = Outcome.SUCCEEDED
            elif event.retrying:
                outcome = Outcome.RETRIED
            elif event.kind is not None and event.kind.in_doubt:
                outcome = Outcome.IN_DOUBT
            else:
                outcome = Outcome.FAILED
            if outcome is Outcome.IN_DOUBT:
                self.in_doubt((event.step, event.item), timing.server, timing.open_since, now)
            else:
                self.spans.append(CallSpan(timing.server, timing.open_since, now, outcome))
            timing.open_since, timing.last_end = None, now
            if outcome is Outcome.RETRIED:
                timing.waiting_since = now
        elif kind is RunResumed:
            # The calls an earlier attempt left unanswered ended with it (in doubt), not with this one: drawn up
            # to that attempt's last entry, not across the time it was down.
            end = ts_seconds(before) if before is not None else None
            if end is not None:
                for key, timing in self.times.items():
                    if timing.open_since is not None and timing.server is not None:
                        self.in_doubt(key, timing.server, timing.open_since, max(end, timing.open_since))
                        timing.open_since = None
        elif kind is ItemReconciled:
            assert isinstance(event, ItemReconciled)
            at = self.doubted.pop((event.step, event.item), None)
            if at is not None and event.verdict == Verdict.DONE:  # the call happened: its reconcile tool says so
                self.spans[at].outcome = Outcome.RECONCILED
        elif kind is SessionOpened:
            assert isinstance(event, SessionOpened)
            self.sessions[event.server] = event
        elif kind is SessionLost or kind is SessionRetrying:
            assert isinstance(event, SessionLost | SessionRetrying)
            self.reconnects[event.server] = self.reconnects.get(event.server, 0) + (kind is SessionLost)
        elif kind is SessionFailed:
            assert isinstance(event, SessionFailed)
            self.reconnects.setdefault(event.server, 0)

    @property
    def first_ts(self) -> float | None:
        return ts_seconds(self.first_text) if self.first_text is not None else None

    @property
    def last_ts(self) -> float | None:
        return ts_seconds(self.last_text) if self.last_text is not None else None


def _status(item: ItemState, live: bool) -> str:
    if item.status is ItemStatus.DISPATCHED:
        return "running" if live else "in-doubt"
    return item.status.value


def _since(t0: float, value: float | None) -> float | None:
    return round(value - t0, 3) if value is not None else None


def build(
    entries: Iterable[Entry],
    *,
    live: bool = False,
    status: str | None = None,
    version: str = "",
    decisions: Sequence[str] = (),
    edges: dict[str, tuple[str, ...]] | None = None,
    buckets: int = 60,
) -> RunReportModel:
    """The report of a run from its journal's ``entries`` (read as shown), in one pass. ``live``: a process
    still runs it (its dispatched calls are running, not in doubt); ``status``: the run's status as ``runs``
    shows it (default: its last record's, else ``interrupted``); ``decisions``: the commands that decide about
    its items in doubt; ``edges``: its steps' dependencies, in the workflow's order, when the workflow is at hand
    (the journal does not hold them; the steps are then listed in that order); ``buckets``: how many time
    buckets the lanes have."""
    state = RunState(keep_results=set())
    gather = _Gather()
    journal_format = JOURNAL_FORMAT
    for entry in entries:
        state.apply(entry)
        gather.take(entry)
        if isinstance(entry.event, RunStarted):
            journal_format = entry.event.journal or 1
    t0 = gather.first_ts or 0.0
    t1 = gather.last_ts or t0
    for timing in gather.times.values():  # calls never answered: in doubt (or running) until the journal's end
        if timing.open_since is not None and timing.server is not None:
            gather.spans.append(CallSpan(timing.server, timing.open_since, t1, Outcome.IN_DOUBT))  # (or running)
        elif timing.waiting_since is not None and timing.server is not None:  # waiting when the journal ends
            gather.waits.append(WaitSpan(timing.server, timing.waiting_since, t1))
    items = tuple(_items(state, gather, t0, live))
    rank = {sid: n for n, sid in enumerate(edges or {})}  # the workflow's order when known (else the journal's)
    lanes, bucket_s = lanes_of(gather.spans, t0, t1, buckets, gather.waits)
    return RunReportModel(
        run_id=state.run_id,
        workflow=state.workflow,
        status=status or (state.status.value if state.status is not None else "interrupted"),
        exit_code=state.exit_code,
        started_at=state.started_at,
        ended_at=state.ended_at,
        duration_s=round(t1 - t0, 3),
        attempts=state.attempts,
        inputs=state.inputs,
        outputs=state.outputs,
        journal_format=journal_format,
        mcp_run_version=version,
        steps=tuple(sorted(_steps(state, gather, items, t0, live), key=lambda step: rank.get(step.id, len(rank)))),
        items=items,
        failures=tuple(_groups(state, items)),
        in_doubt=tuple(item for item in items if item.status == "in-doubt"),
        decisions=tuple(decisions),
        servers=tuple(_servers(state, gather)),
        lanes=lanes,
        bucket_s=bucket_s,
        edges=dict(edges or {}),
    )


def _items(state: RunState, gather: _Gather, t0: float, live: bool) -> Iterable[ItemRow]:
    for sid, step in state.steps.items():
        for item in step.items.values():
            timing = gather.times.get((sid, item.key)) or _Timing()
            end = timing.last_end
            yield ItemRow(
                step=sid,
                key=item.key,
                index=item.index,
                status=_status(item, live),
                kind=item.kind.value if item.kind is not None else None,
                error=item.error,
                attempts=item.attempts,
                server=timing.server,
                tool=timing.tool,
                start_s=_since(t0, timing.first),
                duration_s=round(end - timing.first, 3) if end is not None and timing.first is not None else None,
                accepted=item.decided is Decision.ACCEPT and item.status is ItemStatus.SUCCEEDED,
            )


def _steps(state: RunState, gather: _Gather, items: tuple[ItemRow, ...], t0: float, live: bool) -> Iterable[StepRow]:
    for sid, step in state.steps.items():
        counts = step.counts(live=live)
        status = step.status.value
        if step.status is StepStatus.RUNNING and not live:
            status = "unfinished"
        server, tool = gather.step_server.get(sid, (None, None))
        start, end = ts_seconds(step.started_at), ts_seconds(step.finished_at)
        yield StepRow(
            id=sid,
            status=status,
            fan_out=step.fan_out,
            total=counts.total,
            succeeded=counts.succeeded,
            failed=counts.failed,
            in_doubt=counts.in_doubt,
            running=counts.running,
            reused=counts.reused,
            reconciled=step.reconciled,
            server=server,
            tool=tool,
            reason=step.reason,
            kind=step.kind.value if step.kind is not None else None,
            start_s=_since(t0, start),
            duration_s=round(end - start, 3) if start is not None and end is not None else None,
        )


def _first_line(text: str | None) -> str:
    line = (text or "").strip().split("\n", 1)[0]
    return line if len(line) <= GROUP_TEXT else line[: GROUP_TEXT - 3] + "..."


def _groups(state: RunState, items: tuple[ItemRow, ...]) -> Iterable[FailureGroup]:
    """Servers given up on, steps failed as a whole, then failed items grouped by kind and error, the largest
    group first."""
    for session in state.sessions.values():
        if session.status == "failed":
            kind = session.kind.value if session.kind is not None else None
            yield FailureGroup(kind, _first_line(session.error), (), server=session.server)
    for sid, step in state.steps.items():
        if step.kind is not None and step.reason:
            yield FailureGroup(step.kind.value, _first_line(step.reason), ((sid, None),))
    groups: dict[tuple[str | None, str], list[tuple[str, str | None]]] = {}
    for item in items:
        if item.failed:
            groups.setdefault((item.kind, _first_line(item.error)), []).append((item.step, item.key))
    for (kind, error), members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        yield FailureGroup(kind, error, tuple(members))


def _servers(state: RunState, gather: _Gather) -> Iterable[ServerInfo]:
    names = dict.fromkeys([*gather.sessions, *gather.reconnects, *state.sessions])
    for name in names:
        opened = gather.sessions.get(name)
        info = opened.server_info if opened is not None else {}
        session = state.sessions.get(name)
        yield ServerInfo(
            name=name,
            protocol_version=opened.protocol_version if opened is not None else None,
            server_name=_text(info.get("name")),
            server_version=_text(info.get("version")),
            reconnects=gather.reconnects.get(name, 0),
            failed=session.error if session is not None and session.status == "failed" else None,
            throttled=session.throttled if session is not None else 0,
            paused_s=session.paused_s if session is not None else 0.0,
        )


def _text(value: Any) -> str | None:
    return str(value) if value is not None else None
