"""Where a run's events go: numbered, timestamped, masked, shown to observers and appended to the journal.

Durability by need. Every line reaches the file in the order it was emitted (one buffer, one writer, an
``O_APPEND`` file), and an fsync makes durable every line before it. So a power loss leaves a prefix of the
journal that holds at least everything up to the last completed fsync (and maybe some of what was written
after it, ending in a torn line, which is ignored on read). Each record waits for only what it needs:

=================================  =============================  ===========================================
record                             how it is written              what a power loss can cost
=================================  =============================  ===========================================
``run_started``, ``run_resumed``   ``commit``: fsynced before     nothing: no call was made yet
                                   the run goes on
``item_dispatched``, call not      ``commit``: fsynced before     nothing: a call made always has its
safe to repeat                     the request is written         record; without a result it is in doubt
``item_dispatched``, call safe to  ``append``: queued before the  the record: a resume sees the item as not
repeat (idempotent step, or        request is written, not        dispatched and calls it again, which is
trusted annotations on the         waited for                     allowed
session's tool list)
``item_succeeded``,                ``record``: written within     the result: the item is in doubt (not safe)
``item_failed``,                   ``write_interval`` (20 ms),    or called again (safe); never run twice
``stream_resumed``, step,          fsynced within                 when not safe (its dispatch is durable)
session and run-end records        ``sync_interval`` (100 ms),
                                   or with the next commit
``progress``, ``log``              ``note``: written within       notifications nobody resumes from
                                   ``flush_interval`` (0.2 s)
=================================  =============================  ===========================================

How many notes reach this log is bounded before they get here (:mod:`runner.engine.journal.notes`: progress coalesced
per item, log messages capped per item and per server).

At the end (:meth:`EventLog.close`) everything is written and fsynced; a signal asks for an fsync at once
(:meth:`EventLog.sync_soon`). A lost record can make an item in doubt, or make a safe call again; it can
never make an unsafe call twice, because a record is lost only with every record after it, and an unsafe
call's dispatch is durable before the call. A result that later calls read (a template) was emitted before
their dispatch, so it is durable whenever they are.

The disk work runs in the trio thread while the disk is quick, else in one long-lived thread
(:class:`~runner.engine.journal.disk.DiskThread`): the writer task hands it one job at a time (one write of
everything emitted since the last job, and one fsync when a commit waits or the sync timer is due). Commits
that arrive while a job runs wait for the next one and share its fsync: group commit by design.

Secrets never reach the file or an observer in clear: every event is masked value by value before it is
serialized (:class:`~runner.masking.Masker`: each form of each secret by its named placeholder,
``***env.API_TOKEN***``), every field but those mcp-run fills itself (``UNMASKED_FIELDS``). The journal holds
the *encoded* text (:meth:`~runner.masking.Masker.encode`: a ``***`` of a server's text is written
``***=``, so that only the masker's placeholders read back as secrets); observers get it as shown
(placeholders as they are, the server's text as it was sent). A journal of a format before 3, resumed, keeps
being written as it was (masked, not encoded): ``journal_format``.

Without a journal (``--no-journal``) the same object still numbers events and feeds observers.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Awaitable, Callable
from json.encoder import c_encode_basestring, c_make_encoder  # type: ignore[attr-defined]
from typing import Any

import trio

from runner.engine.core.events import JOURNAL_FORMAT, AnyEvent, Entry, decode, encode, written_fields
from runner.engine.journal.disk import DiskThread
from runner.errors import JournalWriteError
from runner.jsontext import escape
from runner.masking import MARK, MARKED_FORMAT, UNMASKED_FIELDS, Masker, shown_value

__all__ = ["UNMASKED_FIELDS", "DurableGate", "EventLog", "JournalWriteError", "Masker", "Observer"]

Observer = Callable[[Entry], object]

# The standard library's C encoder, built once: ``JSONEncoder.encode`` builds one per call, which is a third of
# a line's cost. Its text is ``json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)``'s,
# without the check for circular references (journal values are trees: they come from JSON). orjson and msgspec
# were measured (``python -m tests.benchmarks.encoders``): faster still, but both refuse a lone surrogate
# instead of writing it, so the journal would need a second path.
_encode = c_make_encoder(None, str, c_encode_basestring, None, ":", ",", False, False, True)


def _dumps(obj: Any) -> str:
    """One journal line: compact, UTF-8 kept, lone surrogates and C1 controls as JSON escapes (lossless)."""
    return escape("".join(_encode(obj, 0)))


def _value(value: Any) -> str:
    return "".join(_encode(value, 0))


_LineWriter = Callable[[int, str, Any], str]
_LINE_WRITERS: dict[type[Any], _LineWriter] = {}


def _line_writer(cls: type[Any]) -> _LineWriter:
    """The function that writes an event of ``cls`` as ``_dumps(encode(Entry(seq, ts, event)))`` does, without
    the dict: the constant parts (keys, the ``type``) written once, a string or an integer value by the encoder's
    own C functions, any other value by the encoder (so the text is the same, byte for byte). Made on first use
    of the class (a run writes a few of its 23 kinds), not at import."""
    scope: dict[str, Any] = {"_s": c_encode_basestring, "_i": int.__repr__, "_o": _value, "_escape": escape, "_e": ""}
    text = '{{"seq":{seq},"ts":"{ts}"'  # an f-string's text: its literal braces doubled
    for n, (name, optional) in enumerate(written_fields(cls)):
        key = f",{_value(name)}:"
        if name == "type":
            text += key + _value(cls.__dataclass_fields__["type"].default)
            continue
        value = f"(_s(v) if (c := (v := e.{name}).__class__) is str else _i(v) if c is int else _o(v))"
        if optional:  # left out when None: the key is a name in scope (no quotes inside the f-string's braces)
            scope[f"_k{n}"] = key
            text += f"{{_k{n} + {value} if e.{name} is not None else _e}}"
        else:
            text += key + "{" + value + "}"
    code = ["def line(seq, ts, e):", f"    return _escape(f'{text}}}}}')"]
    exec("\n".join(code), scope)  # the text is ours: field names of an event class
    writer: _LineWriter = scope["line"]
    _LINE_WRITERS[cls] = writer
    return writer


def _line(entry: Entry) -> str:
    """The journal line of ``entry``, with no secret to mask in it: ``_dumps(encode(entry))``, a third of its cost
    (two lines per item)."""
    event = entry.event
    writer = _LINE_WRITERS.get(type(event)) or _line_writer(type(event))
    return writer(entry.seq, entry.ts, event)


# UNMASKED_FIELDS (runner.masking): the fields mcp-run fills itself, never masked nor encoded.


_clock: list[Any] = [-1, "", -1, ""]  # the last millisecond and its text, the last second and its text


def _now() -> str:
    """The time in UTC to the millisecond (``2026-11-29T21:35:12.123Z``): the text of a second is formatted once
    per second and that of a millisecond once per millisecond, since a busy run writes tens of events in one."""
    clock = _clock
    ms = time.time_ns() // 1_000_000
    if ms != clock[0]:
        seconds, millis = divmod(ms, 1000)
        if seconds != clock[2]:
            clock[2] = seconds
            clock[3] = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(seconds))
        clock[0] = ms
        clock[1] = f"{clock[3]}{millis:03d}Z"
    text: str = clock[1]
    return text


class DurableGate:
    """Opens once one line of an :class:`EventLog` is durable (:meth:`EventLog.stage`): the
    :class:`~runner.transports.base.Gate` a queued request waits behind."""

    __slots__ = ("_log", "_ticket")

    def __init__(self, log: EventLog, ticket: int) -> None:
        self._log = log
        self._ticket = ticket

    def passed(self) -> bool:
        return self._log.passed(self._ticket)

    async def wait(self) -> None:
        await self._log.wait_durable(self._ticket)


class EventLog:
    """Numbered events for observers and, when ``fd`` is given, for the journal file.

    ``write_interval``: records (``record``, ``append``) are written within it; ``flush_interval``: notes;
    ``sync_interval``: what was written is fsynced within it (``fsync=False``: never). ``offload``: how a job
    of the writer reaches the disk, called as ``await offload(write, data, sync)`` (by default, in a
    :class:`~runner.engine.journal.disk.DiskThread` started by :meth:`run`; tests run it inline on the virtual
    clock)."""

    def __init__(
        self,
        fd: int | None,
        *,
        masker: Masker | None = None,
        start_seq: int = 0,
        flush_interval: float = 0.2,
        write_interval: float = 0.02,
        sync_interval: float = 0.1,
        fsync: bool = True,
        offload: Callable[..., Awaitable[None]] | None = None,
        journal_format: int = JOURNAL_FORMAT,
    ) -> None:
        self._fd = fd
        self._masker = masker or Masker()
        self._encoded = journal_format >= MARKED_FORMAT
        self._seq = start_seq
        self._flush_interval = flush_interval
        self._write_interval = write_interval
        self._sync_interval = sync_interval
        self._fsync = fsync
        self._offload = offload
        self._observers: list[Observer] = []
        self._buffer: list[str] = []
        # Durability by count: the n-th line given to the writer is durable once ``_durable >= n``.
        self._lines = 0  # lines given to the writer so far (buffered or written)
        self._wanted = 0  # the highest line someone waits for (a commit, a gate)
        self._durable = 0  # lines written and fsynced (written only, when ``fsync`` is off)
        self._durable_changed = trio.Event()  # set (and replaced) each time ``_durable`` grows or the log fails
        self._wake = trio.Event()
        self._scope: trio.CancelScope | None = None  # the writer's wait, while it waits
        self._write_at = math.inf  # when the buffer must be written (records in it), on trio's clock
        self._note_at = math.inf  # ... when only notes are in it
        self._sync_at = math.inf  # when what was written (or is buffered) must be fsynced
        self._unsynced = False  # lines written since the last fsync
        self._closing = False
        self._failed: JournalWriteError | None = None
        self.lines_written = 0
        self.fsyncs = 0
        self.handoffs = 0  # jobs handed to the disk (each a write, an fsync, or both)

    @property
    def seq(self) -> int:
        return self._seq

    @property
    def masker(self) -> Masker:
        return self._masker

    def subscribe(self, observer: Observer) -> None:
        self._observers.append(observer)

    # -- producing events ----------------------------------------------------------------------------

    def _emit(self, event: AnyEvent) -> str | None:
        self._seq += 1
        entry = Entry(self._seq, _now(), event)
        line = None
        if self._masker:
            obj, entry = self._masked(encode(entry), entry)
            if self._fd is not None:
                line = _dumps(obj)
        elif self._fd is not None:  # else nothing to write or mask: observers get the event as is
            line = _line(entry)
            if self._encoded and MARK in line:
                # No secrets, but text that holds a mark: escaped, so that no later read takes it for a secret.
                line = _dumps(self._masker.encode_fields(encode(entry), UNMASKED_FIELDS))
        for observer in self._observers:
            observer(entry)
        return line

    def _masked(self, obj: dict[str, Any], entry: Entry) -> tuple[dict[str, Any], Entry]:
        """The record with its secrets masked (encoded, from format 3 on), and the entry observers see: the
        same entry when nothing was masked, else the masked one as shown."""
        if self._encoded:
            masked = self._masker.encode_fields(obj, UNMASKED_FIELDS)
            if masked is obj:
                return obj, entry
            return masked, decode(shown_value(masked))  # a secret (or a mark) in it: observers see it as shown
        masked = self._masker.mask_fields(obj, UNMASKED_FIELDS)
        if masked is obj:
            return obj, entry
        return masked, decode(masked)

    async def commit(self, event: AnyEvent, /) -> None:
        """Emit and wait until the line is durable (written and fsynced, with every line before it). Raises
        ``JournalWriteError`` once the journal cannot be written: nothing may be dispatched without its
        record."""
        gate = self.stage(event)
        if gate is not None:
            await gate.wait()

    def stage(self, event: AnyEvent, /) -> DurableGate | None:
        """Emit and ask for the line to be made durable at once, without waiting: the returned gate opens when
        it is (None: there is no journal, nothing to wait for). What :meth:`commit` waits on; a transport that
        queues its writes waits on it in its writer task, so the caller parks once, for its call's outcome.
        Raises ``JournalWriteError`` once the journal cannot be written."""
        if self._failed is not None:
            raise self._failed
        line = self._emit(event)
        if self._fd is None or line is None:
            return None
        self._buffer.append(line + "\n")
        self._lines += 1
        self._wanted = self._lines
        self._wake.set()
        return DurableGate(self, self._lines)

    def passed(self, ticket: int) -> bool:
        """Whether the ``ticket``-th line is durable."""
        return self._durable >= ticket

    async def wait_durable(self, ticket: int) -> None:
        """Wait until the ``ticket``-th line is durable; raises ``JournalWriteError`` once the journal failed."""
        while self._durable < ticket:
            if self._failed is not None:
                raise self._failed
            await self._durable_changed.wait()

    def append(self, event: AnyEvent, /) -> None:
        """Emit a record that must precede what follows it but need not be durable yet (the dispatch of a call
        safe to repeat): as :meth:`record`, but refused (``JournalWriteError``) once the journal has failed,
        as :meth:`commit` is."""
        if self._failed is not None:
            raise self._failed
        self.record(event)

    def record(self, event: AnyEvent, /) -> None:
        """Emit; the line is written within ``write_interval`` and fsynced within ``sync_interval`` (or with
        the next commit, if sooner). Once the journal has failed, the event still reaches observers (the run
        is stopping; its next ``commit`` raised)."""
        line = self._emit(event)
        if self._fd is not None and line is not None and self._failed is None:
            self._buffer.append(line + "\n")
            self._lines += 1
            if self._write_at == math.inf:
                now = trio.current_time()
                self._write_at = now + self._write_interval
                if self._sync_at == math.inf and self._fsync:
                    self._sync_at = now + self._sync_interval
                self._hurry(self._write_at)

    def note(self, event: AnyEvent, /) -> None:
        """Emit a high-volume event (progress, log); written within ``flush_interval``."""
        line = self._emit(event)
        if self._fd is not None and line is not None and self._failed is None:
            self._buffer.append(line + "\n")
            self._lines += 1
            if self._note_at == math.inf:
                self._note_at = trio.current_time() + self._flush_interval
                self._hurry(self._note_at)

    def sync_soon(self) -> None:
        """Fsync what was emitted so far now, without waiting for it (a signal came: the machine may be going
        down)."""
        if self._fd is not None and self._fsync:
            self._sync_at = -math.inf
            self._wake.set()

    def _hurry(self, deadline: float) -> None:
        if self._scope is not None and deadline < self._scope.deadline:
            self._scope.deadline = deadline

    # -- the writer task -----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The single writer task. Runs until :meth:`close`; writes and fsyncs whatever is left before it
        returns. Each pass hands one job to the disk: everything emitted since the last one, in order, in one
        write, and one fsync when a commit waits for it or the sync timer is due. Commits that arrive while a
        job runs wait for the next one, so they share its fsync."""
        task_status.started()
        if self._fd is None:
            return
        offload, thread = self._offload, None
        if offload is None:
            thread = DiskThread()
            thread.start()
            offload = thread.run
        try:
            await self._write_loop(offload)
        finally:
            if thread is not None:
                thread.stop()

    async def _write_loop(self, offload: Callable[..., Awaitable[None]]) -> None:
        while True:
            if not self._closing and self._wanted <= self._durable:
                await self._wait_for_work()
            self._wake = trio.Event()
            batch, self._buffer = self._buffer, []
            upto = self._lines
            sync = self._take_sync(bool(batch), self._wanted > self._durable)
            if batch or sync:
                await self._hand_off(offload, batch, sync)
            if sync or not self._fsync:
                self._durable = upto
                self._durable_changed.set()
                self._durable_changed = trio.Event()
            if self._closing and not self._buffer:
                return

    async def _wait_for_work(self) -> None:
        """Sleep until a commit wakes the writer or the first timer (write, note, sync) is due."""
        deadline = min(self._write_at, self._note_at, self._sync_at)
        if trio.current_time() < deadline:
            with trio.CancelScope(deadline=deadline) as scope:
                self._scope = scope
                await self._wake.wait()
            self._scope = None

    def _take_sync(self, batch: bool, wanted: bool) -> bool:
        """Whether this job fsyncs (a commit waits, or the sync timer is due with something unsynced), with the
        timers reset for the job just taken: records emitted from now on set them again."""
        self._write_at = self._note_at = math.inf
        due = self._closing or trio.current_time() >= self._sync_at
        sync = self._fsync and (wanted or (due and (self._unsynced or batch)))
        if sync or due:
            self._sync_at = math.inf
        if sync:
            self._unsynced = False
        elif batch:
            self._unsynced = True
        return sync

    async def _hand_off(self, offload: Callable[..., Awaitable[None]], batch: list[str], sync: bool) -> None:
        """One job to the disk. On failure the journal is marked failed, what waits for a line to be durable is
        woken (it raises) and the writer stops."""
        self.handoffs += 1
        try:
            await offload(self._write, "".join(batch).encode(), sync)
        except OSError as exc:
            self._failed = JournalWriteError(f"cannot write the journal: {exc.strerror or exc}")
            self._durable_changed.set()
            raise self._failed from exc
        self.lines_written += len(batch)

    def _write(self, data: bytes, sync: bool) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        if sync:
            os.fsync(self._fd)
            self.fsyncs += 1

    def close(self) -> None:
        """Ask the writer to write everything, fsync and return."""
        self._closing = True
        self._wake.set()
        if self._scope is not None:
            self._scope.deadline = -math.inf
