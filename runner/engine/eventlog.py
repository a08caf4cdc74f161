"""Where a run's events go: numbered, timestamped, masked, shown to observers and appended to the journal.

Three levels of durability, so that durability does not serialize the scheduler:

- ``await commit(...)`` (write-ahead records: ``item_dispatched``): returns once the line is written *and
  fsynced*. One writer task does group commit: every record waiting when it wakes goes out in one write
  and one fsync, in a worker thread.
- ``record(...)`` (state changes: results, failures, step and run events): queued and written at the
  writer's next wake, which is immediate; fsynced with the next group.
- ``note(...)`` (progress and log notifications): batched on a short timer (``flush_interval``).

Secrets never reach the file or an observer in clear: every event is masked value by value before it is
serialized (:class:`~runner.engine.masking.Masker`: each form of each secret by its named placeholder,
``***env.API_TOKEN***``), every field but those mcp-run fills itself (``UNMASKED_FIELDS``).

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

from runner.engine.events import AnyEvent, Entry, decode, encode
from runner.engine.masking import Masker
from runner.errors import McpRunError
from runner.jsontext import escape

__all__ = ["EventLog", "JournalWriteError", "Masker", "Observer"]

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


# Fields that mcp-run itself fills (the record's frame, ids and names from the workflow, counts, vocabularies):
# never masked, so a secret that happens to equal ``log`` or a timestamp's digits cannot break a record.
# Every other field (results, errors, log data, inputs, outputs, what a server says about itself) is masked,
# including any field added later. A fan-out item's key (``item``) is refused by the scheduler when it holds a
# secret, before any call.
UNMASKED_FIELDS: frozenset[str] = frozenset(
    {
        "seq", "ts", "type", "run_id", "workflow", "workflow_hash", "fingerprints", "pid", "env", "journal",
        "allow_changed", "retry_failed", "server", "reconnects", "down_s", "attempt", "delay_s", "remaining_s",
        "kind", "step", "items", "reused", "fresh", "cause", "item", "index", "tool", "request_id",
        "progress_token", "progress", "total", "status", "counts", "exit_code", "retrying", "retry_in",
    }
)  # fmt: skip


class JournalWriteError(McpRunError):
    """The journal could not be written (disk full, permissions): the run stops rather than go on blind.
    ``run_id``: the run, when the lifecycle knows it (the CLI prints how to resume it)."""

    run_id: str | None = None


_clock: tuple[int, str] = (-1, "")  # the last millisecond formatted, and its text


def _now() -> str:
    """The time in UTC to the millisecond (``2026-11-29T21:35:12.123Z``), formatted once per millisecond: a
    busy run writes tens of events in one."""
    global _clock
    ms = time.time_ns() // 1_000_000
    if ms != _clock[0]:
        seconds, millis = divmod(ms, 1000)
        _clock = (ms, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z")
    return _clock[1]


class EventLog:
    """Numbered events for observers and, when ``fd`` is given, for the journal file."""

    def __init__(
        self,
        fd: int | None,
        *,
        masker: Masker | None = None,
        start_seq: int = 0,
        flush_interval: float = 0.2,
        fsync: bool = True,
        offload: Callable[..., Awaitable[None]] | None = None,
    ) -> None:
        self._fd = fd
        self._masker = masker or Masker()
        self._seq = start_seq
        self._flush_interval = flush_interval
        self._fsync = fsync
        # Writes and fsyncs run in a worker thread so the scheduler never waits on the disk.
        self._offload = offload or trio.to_thread.run_sync
        self._observers: list[Observer] = []
        self._buffer: list[str] = []
        self._waiters: list[trio.Event] = []
        self._wake = trio.Event()
        self._scope: trio.CancelScope | None = None
        self._lazy_pending = False
        self._unsynced = False
        self._closing = False
        self._failed: JournalWriteError | None = None
        self.lines_written = 0
        self.fsyncs = 0

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
        if self._fd is not None or self._masker:  # else nothing to write or mask: observers get the event as is
            obj = encode(entry)
            if self._masker:
                masked = self._masker.mask_fields(obj, UNMASKED_FIELDS)
                if masked is not obj:  # a secret in it: observers see the masked event too
                    obj = masked
                    entry = decode(masked)
            line = _dumps(obj) if self._fd is not None else None
        for observer in self._observers:
            observer(entry)
        return line

    async def commit(self, event: AnyEvent, /) -> None:
        """Emit and wait until the line is durable (written and fsynced). Raises ``JournalWriteError`` once
        the journal cannot be written: nothing may be dispatched without its record."""
        if self._failed is not None:
            raise self._failed
        line = self._emit(event)
        if self._fd is None or line is None:
            return
        done = trio.Event()
        self._buffer.append(line + "\n")
        self._waiters.append(done)
        self._wake.set()
        await done.wait()
        if self._failed is not None:
            raise self._failed

    def record(self, event: AnyEvent, /) -> None:
        """Emit; the line is written at the writer's next wake (now). Once the journal has failed, the
        event still reaches observers (the run is stopping; its next ``commit`` raised)."""
        line = self._emit(event)
        if self._fd is not None and line is not None and self._failed is None:
            self._buffer.append(line + "\n")
            self._unsynced = True
            self._wake.set()

    def note(self, event: AnyEvent, /) -> None:
        """Emit a high-volume event (progress, log); written within ``flush_interval``."""
        line = self._emit(event)
        if self._fd is not None and line is not None and self._failed is None:
            self._buffer.append(line + "\n")
            if not self._lazy_pending:
                self._lazy_pending = True
                if self._scope is not None:
                    self._scope.deadline = min(self._scope.deadline, trio.current_time() + self._flush_interval)

    # -- the writer task -----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The single writer task. Runs until :meth:`close`; writes whatever is left before it returns."""
        task_status.started()
        if self._fd is None:
            return
        while True:
            with trio.CancelScope(deadline=math.inf) as scope:
                self._scope = scope
                if self._lazy_pending:
                    scope.deadline = trio.current_time() + self._flush_interval
                if not self._closing:
                    await self._wake.wait()
            self._scope = None
            self._wake = trio.Event()
            batch, self._buffer = self._buffer, []
            waiters, self._waiters = self._waiters, []
            self._lazy_pending = False
            sync = self._fsync and (bool(waiters) or (self._closing and self._unsynced))
            if sync:
                self._unsynced = False
            if batch or sync:
                try:
                    await self._offload(self._write, "".join(batch).encode(), sync)
                except OSError as exc:
                    self._failed = JournalWriteError(f"cannot write the journal: {exc.strerror or exc}")
                    for waiter in waiters:
                        waiter.set()
                    raise self._failed from exc
                self.lines_written += len(batch)
            for waiter in waiters:
                waiter.set()
            if self._closing and not self._buffer:
                return

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
        """Ask the writer to flush everything, fsync and return."""
        self._closing = True
        self._unsynced = True
        self._wake.set()
        if self._scope is not None:
            self._scope.deadline = -math.inf
