"""The JSONL journal, sans-IO: the events a run writes, and folding them back into the state of a run.

One JSON object per line. Every line has ``seq`` (1, 2, 3, ... over the life of the run, resumes
included), ``ts`` (UTC, ISO 8601) and ``type``; most name the ``step`` and, in a fan-out, the ``item`` (its
key) and ``index`` they concern. The types, in the order a run writes them:

==================  ==========================================================================================
``run_started``     ``run_id``, ``workflow`` (absolute path), ``workflow_hash``, ``inputs`` (secrets masked),
                    ``fingerprints`` (step -> hash of its definition and its upstream steps), ``env`` (names
                    of the environment variables the run read, never their values), ``pid``
``run_resumed``     ``pid``, ``fingerprints``, ``allow_changed``, ``retry_failed``
``session_opened``  ``server``, ``protocol_version``, ``server_info``; after a reconnect also
                    ``reconnects`` and ``down_s``
``session_lost``    ``server``, ``error``: the session in use was lost (the server went away)
``session_retrying`` ``server``, ``attempt``, ``delay_s`` (the next attempt starts after exactly this),
                    ``remaining_s``, ``error``
``session_failed``  ``server``, ``error``, ``kind``: given up; the items it would have run are left undone
``step_started``    ``step``, ``items`` (fan-out size) when it fans out, ``reused`` (results a resume
                    takes from the journal)
``step_skipped``    ``step``, ``reason``
``item_dispatched`` ``step``, ``item``, ``index``, ``server``, ``tool``, ``request_id``, ``progress_token``,
                    ``attempt``; written and fsynced *before* the request goes out
``progress``        ``step``, ``item``, ``progress``, ``total``, ``message``
``log``             ``server``, ``level``, ``logger``, ``data``, and ``step``/``item`` when known
``stream_resumed``  ``step``, ``item``, ``last_event_id``
``item_succeeded``  ``step``, ``item``, ``index``, ``result`` (the MCP result)
``item_failed``     ``step``, ``item``, ``index``, ``kind`` (see ``FAILURE_KINDS``), ``error``, ``result``
``step_finished``   ``step``, ``status``, ``counts``
``run_finished``    ``status`` (``succeeded`` or ``failed``), ``exit_code``, ``outputs``: the run is closed
``run_stopped``     ``status`` (``in-doubt`` or ``incomplete``), ``exit_code``, ``outputs``: the run ended
                    without a definite answer for every item; it stays open (resumable)
``run_interrupted`` ``status``, ``exit_code``: the run stopped on a signal; it stays open (resumable)
==================  ==========================================================================================

**Open and closed runs.** A run is *closed* only when every item has a definite answer: its last run-level
record is ``run_finished`` with status ``succeeded`` or ``failed`` (``CLOSED_STATUSES``). Anything else (a
run in doubt, incomplete because a server could not be reached, interrupted, or crashed) is *open*: a
resume continues it and no new run of the workflow starts while it is open. A closed ``failed`` run can be
reopened by ``--retry-failed`` (its ``run_resumed`` record says ``retry_failed``). Journals of earlier
versions that closed a run as ``in-doubt`` with ``run_finished`` read as open.

Folding never trusts what it cannot see: an item is *succeeded* only with its ``item_succeeded`` line; an
item whose last record is ``item_dispatched`` is *dispatched* (in flight while the run's process lives, **in
doubt** once it is gone), and one whose last record is ``item_failed`` of kind ``cancelled``, ``timeout`` or
``outcome-unknown`` is in doubt: the server may or may not have run it. One that a resume skipped
(``skipped-in-doubt``) stays skipped: that decision is not undone by a later resume.

A torn last line (the process died mid-write: no final newline) is ignored on read; any other line that is
not a JSON object is an error naming its line number.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, get_args

from runner.errors import McpRunError
from runner.exitcodes import ExitCode

__all__ = [
    "CLOSED_STATUSES",
    "EVENT_TYPES",
    "FAILURE_KINDS",
    "IN_DOUBT_KINDS",
    "ItemState",
    "JournalCorrupt",
    "RunState",
    "StepState",
    "fold",
    "iter_journal",
    "parse_journal",
    "peek_journal",
    "read_journal",
]

EVENT_TYPES: Final = (
    "run_started",
    "run_resumed",
    "session_opened",
    "session_lost",
    "session_retrying",
    "session_failed",
    "step_started",
    "step_skipped",
    "item_dispatched",
    "progress",
    "log",
    "stream_resumed",
    "item_succeeded",
    "item_failed",
    "step_finished",
    "run_finished",
    "run_stopped",
    "run_interrupted",
)

# A run whose last run-level record is `run_finished` with one of these statuses is closed.
CLOSED_STATUSES: Final = frozenset({"succeeded", "failed"})

FailureKind = Literal[
    "connection-before-send",
    "outcome-unknown",
    "protocol-error",
    "tool-error",
    "timeout",
    "cancelled",
    "skipped-in-doubt",
    "template-error",
]
FAILURE_KINDS: Final[tuple[str, ...]] = get_args(FailureKind)
# Failures after which the server may have done the work.
IN_DOUBT_KINDS: Final = frozenset({"outcome-unknown", "timeout", "cancelled"})

# "dispatched": sent (or about to be), no answer recorded: in flight while the run's process lives, in doubt
# once it is gone. "skipped": it was in doubt and a resume decided to skip it (--skip-in-doubt); a decision
# that stays, so later resumes do not call it again unless told to (--rerun-in-doubt).
ItemStatus = Literal["dispatched", "succeeded", "failed", "in-doubt", "skipped"]


class JournalCorrupt(McpRunError):
    """A journal line that is neither valid JSON nor the torn last line of a crash."""

    exit_code = ExitCode.USAGE


@dataclass(slots=True)
class ItemState:
    key: str
    index: int | None = None
    status: ItemStatus = "dispatched"
    result: dict[str, Any] | None = None
    error: str | None = None
    kind: str | None = None
    dispatched_at: str | None = None
    request_id: Any = None
    attempts: int = 0

    @property
    def in_doubt(self) -> bool:
        """No definite answer: dispatched without a result, or ended in a way that leaves the outcome
        unknown. (For a run whose process still lives, ``dispatched`` items are in flight.)"""
        return self.status == "in-doubt" or self.status == "dispatched"


@dataclass(slots=True)
class StepState:
    status: str = "pending"
    items: dict[str, ItemState] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class RunState:
    """What a journal says about a run."""

    run_id: str | None = None
    workflow: str | None = None
    workflow_hash: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    fingerprints: dict[str, str] = field(default_factory=dict)
    env_names: list[str] = field(default_factory=list)
    steps: dict[str, StepState] = field(default_factory=dict)
    started_at: str | None = None
    finished_at: str | None = None
    status: str | None = None
    closed_by_record: bool = False  # the last run-level record was run_finished
    exit_code: int | None = None
    outputs: Any = None
    last_seq: int = 0
    events: int = 0
    logs: list[dict[str, Any]] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        """Closed: every item has a definite answer (see the module docstring); a resume has nothing to do
        unless ``--retry-failed`` reopens a failed run."""
        return self.status in CLOSED_STATUSES and self.closed_by_record

    def in_doubt(self) -> list[tuple[str, ItemState]]:
        """Every (step, item) whose outcome is unknown, in journal order of dispatch."""
        return [(sid, item) for sid, step in self.steps.items() for item in step.items.values() if item.in_doubt]

    def item(self, step: str, key: str) -> ItemState | None:
        state = self.steps.get(step)
        return state.items.get(key) if state is not None else None


def iter_journal(
    lines: Iterable[bytes], *, source: str = "journal.jsonl", unmask: Callable[[str], str] | None = None
) -> Iterator[dict[str, Any]]:
    """Events from journal lines (each with its newline), lazily: a 100,000-event journal is never held as
    a list. A last line without its newline is a torn write and is skipped; any other bad line raises
    ``JournalCorrupt`` naming it."""
    line_no = 0
    for line in lines:
        line_no += 1
        if not line.endswith(b"\n"):
            return  # torn tail: the process died mid-write
        if not line.strip():
            continue
        try:
            event = json.loads(unmask(line.decode()) if unmask is not None and b"***" in line else line)
        except ValueError as exc:
            raise JournalCorrupt(f"{source}:{line_no}: corrupt journal line ({exc})") from None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise JournalCorrupt(f"{source}:{line_no}: journal line is not an event object")
        yield event


def parse_journal(data: bytes, *, source: str = "journal.jsonl") -> tuple[list[dict[str, Any]], int]:
    """Parse journal bytes into events. Returns the events and the length of the valid prefix (up to and
    including the last complete line), which is where a resume appends after cutting a torn tail."""
    end = data.rfind(b"\n") + 1
    return list(iter_journal(data[:end].splitlines(keepends=True), source=source)), end


def read_journal(
    path: Path, *, keep_results: set[str] | None = None, unmask: Callable[[str], str] | None = None
) -> RunState:
    """Fold the journal file at ``path`` line by line."""
    with path.open("rb") as f:
        return fold(iter_journal(f, source=str(path), unmask=unmask), keep_results=keep_results)


def peek_journal(path: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The first and the last complete events of a journal, reading only its ends (for `runs` and for
    finding an unfinished run among many)."""
    with path.open("rb") as f:
        first_line = f.readline()
        size = f.seek(0, 2)
        tail = b""
        if size:
            f.seek(max(0, size - 65536))
            tail = f.read()
    first = _event_or_none(first_line)
    end = tail.rfind(b"\n")
    if end < 0:
        return first, None
    start = tail.rfind(b"\n", 0, end) + 1
    return first, _event_or_none(tail[start : end + 1])


def _event_or_none(line: bytes) -> dict[str, Any] | None:
    if not line.endswith(b"\n"):
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def fold(events: Iterable[dict[str, Any]], *, keep_results: set[str] | None = None) -> RunState:
    """Replay events into a :class:`RunState`. ``keep_results`` limits which steps' results are kept in
    memory (None keeps all): a 100,000-item fan-out nobody refers to needs only its statuses."""
    state = RunState()
    for event in events:
        state.events += 1
        seq = event.get("seq")
        if isinstance(seq, int):
            state.last_seq = max(state.last_seq, seq)
        kind = event["type"]
        step_id = event.get("step")
        if kind in ("item_dispatched", "item_succeeded", "item_failed"):
            step = state.steps.setdefault(str(step_id), StepState())
            key = str(event.get("item", ""))
            item = step.items.get(key)
            if item is None:
                item = step.items[key] = ItemState(key)
            if event.get("index") is not None:
                item.index = event["index"]
            if kind == "item_dispatched":
                item.status = "dispatched"
                item.dispatched_at = event.get("ts")
                item.request_id = event.get("request_id")
                item.attempts += 1
                item.result = None
                item.error = None
                item.kind = None
            elif kind == "item_succeeded":
                item.status = "succeeded"
                item.result = event.get("result") if keep_results is None or step_id in keep_results else None
                item.error = None
                item.kind = None
            else:
                failure = event.get("kind")
                item.kind = failure
                item.error = event.get("error")
                if failure in IN_DOUBT_KINDS:
                    item.status = "in-doubt"
                elif failure == "skipped-in-doubt":
                    item.status = "skipped"
                else:
                    item.status = "failed"
                if failure == "tool-error" and (keep_results is None or step_id in keep_results):
                    item.result = event.get("result")
        elif kind == "progress" or kind == "stream_resumed":
            continue
        elif kind == "log":
            state.logs.append(event)
        elif kind == "step_started":
            state.steps.setdefault(str(step_id), StepState()).status = "running"
        elif kind == "step_skipped":
            state.steps.setdefault(str(step_id), StepState()).status = "skipped"
        elif kind == "step_finished":
            step = state.steps.setdefault(str(step_id), StepState())
            step.status = str(event.get("status"))
            counts = event.get("counts")
            step.counts = counts if isinstance(counts, dict) else {}
        elif kind == "run_started":
            state.run_id = event.get("run_id")
            state.workflow = event.get("workflow")
            state.workflow_hash = event.get("workflow_hash")
            state.inputs = event.get("inputs") or {}
            state.fingerprints = event.get("fingerprints") or {}
            state.env_names = event.get("env") or []
            state.started_at = event.get("ts")
            if isinstance(event.get("pid"), int):
                state.pids.append(event["pid"])
        elif kind == "run_resumed":
            # A resume reopens the run; whatever finished before stays as recorded per item.
            state.status = None
            state.closed_by_record = False
            state.exit_code = None
            state.finished_at = None
            if isinstance(event.get("fingerprints"), dict):
                state.fingerprints = event["fingerprints"]
            if isinstance(event.get("pid"), int):
                state.pids.append(event["pid"])
        elif kind in ("run_finished", "run_stopped", "run_interrupted"):
            state.status = event.get("status") or ("interrupted" if kind == "run_interrupted" else None)
            state.closed_by_record = kind == "run_finished"
            state.exit_code = event.get("exit_code")
            if kind != "run_interrupted":
                state.outputs = event.get("outputs")
            state.finished_at = event.get("ts")
    return state
