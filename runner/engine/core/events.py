"""The events of a run: one frozen class per journal event type, and their encoding.

Every state change of a run is one of these. The scheduler emits them; the
:class:`~runner.engine.journal.writer.EventLog` numbers and timestamps each (an :class:`Entry`), masks secrets,
appends it to the journal as one JSON object per line and hands it to observers; the
:class:`~runner.engine.core.state.RunState` folds them. ``schemas/journal-event.schema.json`` is generated from
these classes (``python -m runner.schemas``).

A journal line is ``{"seq": N, "ts": "...", "type": "...", **fields}``. A field whose value is ``None`` and
whose default is ``None`` is left out. :func:`decode` checks every field's type (a wrong-typed field raises
``ValueError`` naming it; the journal reader turns that into ``JournalCorrupt`` with the line number),
ignores fields it does not know (so a field added later does not break an older reader) and refuses a
``type`` it does not know. ``run_started.journal`` says which format wrote the journal; a newer one is
refused by name.

The vocabularies their fields use (the statuses, kinds, causes and decisions) are enums in
:mod:`runner.engine.core.vocabulary`; a value a later version wrote still decodes (see "the vocabularies as
fields" below).
"""

from __future__ import annotations

import enum
import typing
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, ClassVar, Final, Literal, TypeAlias, TypeVar

from pydantic import BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError, WithJsonSchema

from runner.engine.core.vocabulary import Decision, FailureKind, RunStatus, SkipCause, StepStatus, Verdict

__all__ = [
    "JOURNAL_FORMAT",
    "BadEvent",
    "DoubtDecided",
    "Entry",
    "Event",
    "ItemDispatched",
    "ItemFailed",
    "ItemReconciled",
    "ItemSucceeded",
    "LogMessage",
    "ProgressNoted",
    "RunEnded",
    "RunFinished",
    "RunInterrupted",
    "RunResumed",
    "RunStarted",
    "RunStopped",
    "ServerThrottled",
    "SessionFailed",
    "SessionLost",
    "SessionOpened",
    "SessionRetrying",
    "StepFinished",
    "StepSkipped",
    "StepStarted",
    "StreamResumed",
    "TaskCreated",
    "TaskUpdated",
    "decode",
    "encode",
    "event_adapter",
    "task_words",
]

JOURNAL_FORMAT: Final = 3
"""The journal format this version writes (``run_started.journal``; absent means 1). It reads every format
up to this one. Format 2 keys a fan-out item without a ``key`` by a readable label instead of its full
SHA-256 (:mod:`runner.workflow.keys`); a format-1 run keeps its keys when it resumes. Format 3 encodes text
(:mod:`runner.masking`: a ``***`` that is not a placeholder is written ``***=``, so that no text a
server sent reads back as a secret); a run of an older format is resumed, and written on, as it was (its
placeholders read back as they did then)."""


# -- the vocabularies as fields ----------------------------------------------------------------------------
# An event field holds the enum itself; the journal holds its value (a StrEnum is its value in JSON). A value
# this version does not know (written by a later one) still decodes, as it did when these fields were strings:
# a kind, cause, run status or decision becomes None (the item's or step's status still says what matters; a
# decision of a later version is nothing this one can act on), a step status becomes failed. A value of the
# wrong type (not a string) is still an error naming the field. The schema says "string", as before: a reader
# accepts any.

_EnumT = TypeVar("_EnumT", bound=enum.StrEnum)


def _known(vocabulary: type[_EnumT], unknown: _EnumT | None = None, *, null: bool = False) -> BeforeValidator:
    """A field of ``vocabulary``: a value it does not know reads as ``unknown``; ``null`` (JSON's) only where
    the field may be absent (``null=True``), as when it was a string."""
    values = {member.value: member for member in vocabulary}

    def check(value: object) -> object:
        if value is None and not null:
            raise ValueError("Input should be a valid string")
        if isinstance(value, str) and not isinstance(value, enum.Enum):
            return values.get(value, unknown)
        return value

    return BeforeValidator(check)


def _string(title: str, *, optional: bool = False) -> WithJsonSchema:
    """The schema of a vocabulary field: a string (or null), as it was when the field was one."""
    if optional:
        return WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "null"}], "title": title})
    return WithJsonSchema({"title": title, "type": "string"})


_Kind: TypeAlias = Annotated[FailureKind | None, _known(FailureKind), _string("Kind")]
_OptionalKind: TypeAlias = Annotated[FailureKind | None, _known(FailureKind, null=True), _string("Kind", optional=True)]
_Cause: TypeAlias = Annotated[SkipCause | None, _known(SkipCause, null=True), _string("Cause", optional=True)]
_StepStatus: TypeAlias = Annotated[StepStatus, _known(StepStatus, StepStatus.FAILED), _string("Status")]
_RunStatus: TypeAlias = Annotated[RunStatus | None, _known(RunStatus), _string("Status")]


# -- the events ---------------------------------------------------------------------------------------------

# Lax, as JSON is: a dict decodes into an event; a wrong type ("kind": [1], "inputs": [1, 2]) is an error.
_CONFIG = ConfigDict(extra="ignore")
_JsonObject: TypeAlias = dict[str, Any]
_Id: TypeAlias = int | str


_E = TypeVar("_E", bound=type)


@typing.dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(field,))
def _event(cls: _E) -> _E:
    """An event class: a slotted, keyword-only dataclass, frozen for the type checker (mypy refuses an assignment
    to a field of an event) but not at run time, where a frozen dataclass's ``__init__`` sets every field through
    ``object.__setattr__``: that made building an event (two per item) three times as costly."""
    return dataclass(slots=True, kw_only=True)(cls)  # type: ignore[return-value]  # the same class, slotted


class Event:
    """Base of every event: a slotted dataclass, frozen for the type checker (see ``_event``), whose ``type``
    field names it in the journal. Types are checked when a journal line is decoded (pydantic validates the
    union), not when the scheduler builds an event: those are trusted, as the message classes of
    :mod:`runner.protocol.jsonrpc` are, so the hot path pays nothing."""

    __slots__ = ()
    __pydantic_config__: ClassVar[ConfigDict] = _CONFIG


@_event
class RunStarted(Event):
    """A new run: ``inputs`` with secrets as placeholders, ``fingerprints`` per step, ``env`` the names (never
    the values) of the environment variables it read; ``secret_inputs`` the inputs whose values were never
    written (a resume asks for them again; absent before format 3, where a value equal to its placeholder said
    so); ``workflow`` (its file's absolute path), ``identity``, ``device`` and ``inode`` are what later
    invocations find the run by (:class:`~runner.engine.journal.rundir.WorkflowIdentity`); ``traceparent`` the
    W3C trace context of the attempt's run span when it was traced (OpenTelemetry: a resumed attempt's span
    links to it; the same in :class:`RunResumed`)."""

    type: Literal["run_started"] = "run_started"
    run_id: str | None = None
    workflow: str | None = None
    identity: str | None = None  # the workflow's identity in its state directory (runner.engine.journal.rundir)
    device: int | None = None  # the workflow file's st_dev and st_ino when the run started
    inode: int | None = None
    workflow_hash: str | None = None
    inputs: _JsonObject = field(default_factory=dict)
    fingerprints: dict[str, str] = field(default_factory=dict)
    pid: int = 0
    env: list[str] = field(default_factory=list)  # absent from journals of mcp-run before 0.1
    journal: int | None = None
    secret_inputs: list[str] | None = None
    traceparent: str | None = None  # the attempt's run span, when it was traced (runner.engine.telemetry)


@_event
class RunResumed(Event):
    type: Literal["run_resumed"] = "run_resumed"
    pid: int
    fingerprints: dict[str, str]
    allow_changed: bool
    retry_failed: bool | None = None
    traceparent: str | None = None


@_event
class SessionOpened(Event):
    type: Literal["session_opened"] = "session_opened"
    server: str
    protocol_version: str | None
    server_info: _JsonObject
    reconnects: int | None = None
    down_s: float | None = None
    era: str | None = None
    """Why ``protocol: auto`` chose this era, when durability decided (first connection only)."""


@_event
class SessionLost(Event):
    type: Literal["session_lost"] = "session_lost"
    server: str
    error: str


@_event
class ServerThrottled(Event):
    """``server`` refused a call for now (``status``: 429, or 503 with Retry-After) and every call to it waits
    ``pause_s``; then at most ``limit`` run at once, at ``rate`` calls per second (None: unpaced). ``cut``: the
    pace was lowered by this answer (None: an answer to a call sent before the last cut, which only counts)."""

    type: Literal["server_throttled"] = "server_throttled"
    server: str
    status: int
    pause_s: float
    limit: int
    rate: float | None = None
    cut: bool | None = None


@_event
class SessionRetrying(Event):
    """The next attempt to reach ``server`` starts after exactly ``delay_s``; ``remaining_s`` of the outage's
    budget are left."""

    type: Literal["session_retrying"] = "session_retrying"
    server: str
    attempt: int
    delay_s: float
    remaining_s: float
    error: str


@_event
class SessionFailed(Event):
    type: Literal["session_failed"] = "session_failed"
    server: str
    kind: _Kind
    error: str


@_event
class StepStarted(Event):
    """``items``: the fan-out's size; ``reused``: results taken from earlier attempts; ``fresh``: the step
    changed since (``--allow-changed``), its history is dropped."""

    type: Literal["step_started"] = "step_started"
    step: str
    items: int | None = None
    reused: int | None = None
    fresh: bool | None = None


@_event
class StepSkipped(Event):
    """``reason`` says why in words, ``cause`` which kind of why (a :class:`SkipCause`)."""

    type: Literal["step_skipped"] = "step_skipped"
    step: str
    reason: str
    cause: _Cause = None  # absent from journals of earlier versions


@_event
class ItemDispatched(Event):
    """Written *before* the request goes out, and fsynced first unless the call is safe to repeat."""

    type: Literal["item_dispatched"] = "item_dispatched"
    step: str
    item: str
    index: int | None
    server: str
    tool: str
    request_id: _Id
    progress_token: _Id
    attempt: int


@_event
class ProgressNoted(Event):
    """An item's progress notification. ``folded``: how many of the item's notifications since its previous
    record were left out of the journal in favour of this one, the last of them (see
    :mod:`runner.engine.journal.notes`)."""

    type: Literal["progress"] = "progress"
    step: str
    item: str
    progress: float
    total: float | None = None
    message: str | None = None
    folded: int | None = None


@_event
class LogMessage(Event):
    """A server's log message. ``omitted``: set on the record mcp-run writes (``logger: "mcp-run"``) in place
    of the messages past the journal's cap, as how many they were (see :mod:`runner.engine.journal.notes`); ``level``
    is then the highest level among them."""

    type: Literal["log"] = "log"
    server: str
    level: str
    logger: str | None = None
    data: Any = None
    step: str | None = None
    item: str | None = None
    omitted: int | None = None


@_event
class StreamResumed(Event):
    type: Literal["stream_resumed"] = "stream_resumed"
    step: str
    item: str
    last_event_id: str


@_event
class TaskCreated(Event):
    """The server took the item's call as a task: fsynced before the client polls it (write-ahead), so a
    resume collects the result by ``task_id`` instead of calling again. ``ttl`` and ``poll_interval`` are the
    server's, in milliseconds (``ttl`` None: kept as long as the server likes)."""

    type: Literal["task_created"] = "task_created"
    step: str
    item: str
    index: int | None
    server: str
    task_id: str
    created_at: str | None = None
    ttl: int | None = None
    poll_interval: int | None = None


@_event
class TaskUpdated(Event):
    """A task's status changed, or its status message did (``working``, ``input_required``, ...)."""

    type: Literal["task_status"] = "task_status"
    step: str
    item: str
    task_id: str
    status: str
    message: str | None = None


def task_words(status: Any, message: Any = None, task_id: Any = None) -> str:
    """A task's status as every view says it: ``task t-123 working: 40% done`` (``task working: 40% done``
    without ``task_id``: the live view's line has no room for it). The one wording of a ``task_status``
    record, for the live view (through the run's state), plain lines, ``logs`` and ``mcp-run call``."""
    named = f" {task_id}" if task_id not in (None, "") else ""
    said = f": {message}" if message not in (None, "") else ""
    return f"task{named} {status}{said}"


@_event
class ItemSucceeded(Event):
    """``cache``: for a step with ``cache:``, the SHA-256 of the call's server, tool, arguments and
    ``cache_key`` (never the arguments themselves), by which a later run finds the result; ``reused_from``: the
    result was not asked for but taken from that earlier run's journal (a cache hit). Both absent from
    journals of earlier versions."""

    type: Literal["item_succeeded"] = "item_succeeded"
    step: str
    item: str
    index: int | None
    result: _JsonObject
    cache: str | None = None
    reused_from: str | None = None


@_event
class ItemFailed(Event):
    """``retrying``: another attempt follows (``retry_in`` seconds later for a call safe to repeat)."""

    type: Literal["item_failed"] = "item_failed"
    step: str
    item: str
    index: int | None = None
    kind: _Kind
    error: str
    result: _JsonObject | None = None
    retrying: bool | None = None
    retry_in: float | None = None


_Decision: TypeAlias = Annotated[Decision | None, _known(Decision), _string("Decision")]


@_event
class DoubtDecided(Event):
    """A decision about items in doubt, journaled (fsynced) before it acts: ``keys`` of ``step`` are the items
    it settles (those in doubt when it was made, and not safe to repeat), ``decision`` a :class:`Decision`."""

    type: Literal["doubt_decided"] = "doubt_decided"
    step: str
    keys: list[str]
    decision: _Decision


_Verdict: TypeAlias = Annotated[Verdict | None, _known(Verdict), _string("Verdict")]


@_event
class ItemReconciled(Event):
    """A step's ``reconcile:`` tool was asked about an item in doubt; journaled (fsynced) before the verdict
    acts. ``verdict`` a :class:`Verdict`: ``done`` (succeeded, ``result`` the reconcile tool's), ``not-done``
    (called again), ``error`` (``error`` says why; it stays in doubt)."""

    type: Literal["item_reconciled"] = "item_reconciled"
    step: str
    item: str
    index: int | None = None
    verdict: _Verdict
    result: _JsonObject | None = None
    error: str | None = None


@_event
class StepFinished(Event):
    """``kind`` and ``error`` when the step failed as a whole (its items could not even be listed)."""

    type: Literal["step_finished"] = "step_finished"
    step: str
    status: _StepStatus
    counts: dict[str, int]
    error: str | None = None
    kind: _OptionalKind = None


@_event
class RunFinished(Event):
    """The run is closed: every item has a definite answer. ``counts``: the run's items as it ended, as
    ``runs`` lists them (``succeeded``, ``failed``, ``in_doubt``), so that listing a run reads only the ends
    of its journal. The same in :class:`RunStopped` and :class:`RunInterrupted`."""

    type: Literal["run_finished"] = "run_finished"
    status: _RunStatus
    exit_code: int
    outputs: _JsonObject | None = None
    counts: dict[str, int] | None = None  # absent from journals of earlier versions


@_event
class RunStopped(Event):
    """The run ended without a definite answer for every item (in doubt, incomplete): it stays open."""

    type: Literal["run_stopped"] = "run_stopped"
    status: _RunStatus
    exit_code: int
    outputs: _JsonObject | None = None
    counts: dict[str, int] | None = None


@_event
class RunInterrupted(Event):
    """The run stopped on a signal: it stays open."""

    type: Literal["run_interrupted"] = "run_interrupted"
    status: _RunStatus
    exit_code: int
    counts: dict[str, int] | None = None


RunEnded: TypeAlias = RunFinished | RunStopped | RunInterrupted
AnyEvent: TypeAlias = (
    RunStarted
    | RunResumed
    | SessionOpened
    | SessionLost
    | SessionRetrying
    | SessionFailed
    | ServerThrottled
    | StepStarted
    | StepSkipped
    | ItemDispatched
    | ProgressNoted
    | LogMessage
    | StreamResumed
    | TaskCreated
    | TaskUpdated
    | ItemSucceeded
    | ItemFailed
    | DoubtDecided
    | ItemReconciled
    | StepFinished
    | RunFinished
    | RunStopped
    | RunInterrupted
)
_CLASSES: Final[tuple[Any, ...]] = typing.get_args(AnyEvent)
_TYPES: Final[dict[str, type[Event]]] = {cls.__dataclass_fields__["type"].default: cls for cls in _CLASSES}
# Per class, the fields written and whether a None value is left out (its default is None).
_FIELDS: Final[dict[type[Event], tuple[tuple[str, bool], ...]]] = {
    cls: tuple((f.name, f.default is None) for f in fields(cls)) for cls in _CLASSES
}


@dataclass(frozen=True, slots=True)
class Entry:
    """An event as the run recorded it: its number in the run (1, 2, 3, ... over every attempt) and its
    time (UTC, ISO 8601 to the millisecond)."""

    seq: int
    ts: str
    event: AnyEvent


_ADAPTER: list[TypeAdapter[AnyEvent]] = []


def event_adapter() -> TypeAdapter[AnyEvent]:
    """The pydantic adapter of the event union (for decoding and the JSON Schema). Built on first use: a run
    that reads no journal never needs it, and building it is a tenth of the CLI's start-up."""
    if not _ADAPTER:
        _ADAPTER.append(TypeAdapter(Annotated[AnyEvent, Field(discriminator="type")]))
    return _ADAPTER[0]


def encode(entry: Entry) -> dict[str, Any]:
    """The journal object of ``entry`` (see the module docstring)."""
    event = entry.event
    out: dict[str, Any] = {"seq": entry.seq, "ts": entry.ts}
    for name, optional in _FIELDS[type(event)]:
        value = getattr(event, name)
        if value is not None or not optional:
            out[name] = value
    return out


class BadEvent(ValueError):
    """A journal object that is not an event: ``field`` names the field at fault (None when it is the
    object as a whole), ``str()`` says what is wrong."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def decode(obj: dict[str, Any]) -> Entry:
    """The entry a journal object holds; :class:`BadEvent` (a ``ValueError``) saying what is wrong with it."""
    seq, ts, kind = obj.get("seq"), obj.get("ts"), obj.get("type")
    if type(seq) is not int or seq < 1:
        raise BadEvent(f"'seq' must be a positive integer, found {_shown(seq)}", "seq")
    if not isinstance(ts, str):
        raise BadEvent(f"'ts' must be a string, found {_shown(ts)}", "ts")
    if not isinstance(kind, str) or kind not in _TYPES:
        raise BadEvent(f"unknown event type {_shown(kind)}", "type")
    try:
        event = event_adapter().validate_python({k: v for k, v in obj.items() if k not in ("seq", "ts")})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:])
        raise BadEvent(f"{kind}: {where or kind}: {first['msg']}", where or None) from None
    return Entry(seq, ts, event)


def _shown(value: Any, limit: int = 60) -> str:
    """``value`` as a message quotes it: its repr, cut to ``limit`` characters (a journal line may hold a
    megabyte where a word was expected)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
