"""How many notifications reach the journal: progress coalesced per item, log messages capped per item.

A server may send a million progress notifications for one call, or log for minutes on end. Journaled one
record each, they made a journal of hundreds of megabytes for three calls (``show`` took 45 s) and a console
of hundreds of thousands of lines. :class:`Notes` stands between the session's callbacks and the
:class:`~runner.engine.journal.writer.EventLog`, so the journal, the views and the fold all see the same bounded
stream:

- **Progress**, per item: the first notification is journaled at once; after it, at most one record per
  ``progress_interval`` (1 s by default): the last notification of the interval, whose ``folded`` field
  counts the notifications left out since the previous record. One that waits is written when its interval
  is over (within two intervals at most, by a task started in the nursery given to :meth:`Notes.attach`
  while some progress waits: even a parked task costs each item of a run instructions), and always before
  the item's result (:meth:`Notes.settle`), so the journal holds the last progress before every result.
- **Log messages**, per item: the first ``log_limit`` (1,000 by default) are journaled; the rest are only
  counted, and one record (``logger: "mcp-run"``, ``omitted: N``, the highest level among them) says how
  many were left out, before the item's result.
- **Log messages of no call**, per server (a stdio server's messages are never tied to a request, so this is
  where all of them go; so do an HTTP server's on its own stream): a budget of ``log_limit`` messages that
  refills at ``log_rate`` a second (100 by default). A long batch that logs a line per call keeps every
  line; a flood keeps its first thousand and then a hundred a second. Where messages were left out, a
  record (as above) says how many, in their place: before the next message journaled, at most one such
  record a second (``GAP_INTERVAL``), and the rest at the end of the run (:meth:`Notes.close`).

Per notification this costs a counter and a comparison with the clock; a record is built only for what is
written. Nothing here changes what a resume does: progress and log records are notes
(:mod:`runner.engine.journal.writer`), which no resume decision reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import trio

from runner.engine.core.events import LogMessage, ProgressNoted
from runner.engine.journal.writer import EventLog
from runner.protocol.mcp import LOG_LEVELS, Progress
from runner.protocol.mcp import LogMessage as McpLogMessage

__all__ = ["GAP_INTERVAL", "LOG_LIMIT", "LOG_RATE", "PROGRESS_INTERVAL", "Notes", "Tally"]

PROGRESS_INTERVAL: Final = 1.0
"""Seconds: an item journals at most one progress record per interval (the last notification in it)."""
LOG_LIMIT: Final = 1000
"""Log messages journaled per item (and the burst per server, for messages of no call); the rest are counted."""
LOG_RATE: Final = 100.0
"""Log messages of no call journaled per second and server, once a burst of ``LOG_LIMIT`` is spent."""
GAP_INTERVAL: Final = 1.0
"""Seconds: a server's record of the messages of no call left out is written at most once per interval."""

_RANK: Final = {level: rank for rank, level in enumerate(LOG_LEVELS)}


@dataclass(slots=True, eq=False)
class Tally:
    """One item's (or one server's) notifications so far: when its next progress record may be written, the
    progress waiting for it and how many were folded since the last record; how many log messages were
    journaled, how many left out and the highest level among those."""

    step: str | None
    item: str | None
    next_at: float = -math.inf
    pending: Progress | None = None
    folded: int = 0
    logs: int = 0
    omitted: int = 0
    omitted_rank: int = -1
    server: str = ""
    tokens: float = 0.0  # a server's budget of log messages of no call, as of ``at``
    at: float = 0.0
    gap_at: float = -math.inf  # when its last record of messages left out was written


class Notes:
    """The gate between notifications and ``log`` (see the module docstring). ``progress_interval`` 0 journals
    every progress notification; ``log_limit`` None journals every log message."""

    def __init__(
        self,
        log: EventLog,
        *,
        progress_interval: float = PROGRESS_INTERVAL,
        log_limit: int | None = LOG_LIMIT,
        log_rate: float = LOG_RATE,
    ) -> None:
        self._log = log
        self._interval = progress_interval
        self._limit = math.inf if log_limit is None else log_limit
        self._rate = log_rate
        self._items: dict[tuple[str | None, str | None], Tally] = {}
        self._servers: dict[str, Tally] = {}
        self._waiting: set[Tally] = set()  # tallies holding a progress to write when its interval is over
        self._nursery: trio.Nursery | None = None
        self._scope: trio.CancelScope | None = None  # of the writer of waiting progress, once started

    def attach(self, nursery: trio.Nursery) -> None:
        """Where the writer of waiting progress runs while some waits (cancelled by :meth:`close`)."""
        self._nursery = nursery

    def tally(self, step: str, item: str) -> Tally:
        """The item's tally (an :class:`~runner.engine.calls.item.ItemCall` keeps it for its progress)."""
        key = (step, item)
        tally = self._items.get(key)
        if tally is None:
            tally = self._items[key] = Tally(step, item)
        return tally

    def progress(self, tally: Tally, p: Progress) -> None:
        """A progress notification of ``tally``'s item: written now, or kept as the last of its interval."""
        now = trio.current_time()
        if now >= tally.next_at:
            tally.next_at = now + self._interval
            folded = tally.folded + (tally.pending is not None)
            tally.pending = None
            tally.folded = 0
            self._waiting.discard(tally)
            self._write_progress(tally, p, folded)
            return
        if tally.pending is None:
            self._waiting.add(tally)
            if self._scope is None and self._nursery is not None:
                self._scope = trio.CancelScope()
                self._nursery.start_soon(self._run_in, self._scope)
        else:
            tally.folded += 1
        tally.pending = p

    def log(self, server: str, where: tuple[str, str] | None, message: McpLogMessage) -> None:
        """A log message of ``server``, of the item ``where`` names (None: of no call in flight)."""
        if where is None:
            tally, admitted = self._server_admits(server)
            step = item = None
        else:
            tally = self._items.get(where) or self.tally(*where)
            tally.server = server
            admitted = tally.logs < self._limit
            step, item = where
        if not admitted:
            tally.omitted += 1
            tally.omitted_rank = max(tally.omitted_rank, _RANK.get(message.level, 1))
            return
        tally.logs += 1
        self._log.note(
            LogMessage(
                server=server, level=message.level, logger=message.logger, data=message.data, step=step, item=item
            )
        )

    def _server_admits(self, server: str) -> tuple[Tally, bool]:
        """The server's tally, and whether one more of its own messages (of no call) is kept: a token bucket of
        ``limit`` messages refilled at ``rate`` a second. The first kept after some were left out writes how
        many (at most once per ``GAP_INTERVAL``), in its place."""
        tally = self._servers.get(server)
        if tally is None:
            tally = self._servers[server] = Tally(None, None, server=server, tokens=self._limit)
            tally.at = trio.current_time() if self._limit != math.inf else 0.0
        now = 0.0
        if self._limit != math.inf:
            now = trio.current_time()
            tally.tokens = min(self._limit, tally.tokens + (now - tally.at) * self._rate)
            tally.at = now
        if tally.tokens < 1:
            return tally, False
        tally.tokens -= 1
        if tally.omitted and now - tally.gap_at >= GAP_INTERVAL:
            tally.gap_at = now
            self._write_omitted(tally)
        return tally, True

    def settle(self, step: str, item: str) -> None:
        """Before the item's result is journaled: its waiting progress, and how many log messages were left out."""
        tally = self._items.pop((step, item), None)
        if tally is not None:
            self._flush(tally)

    def close(self) -> None:
        """At the end of the run: whatever is still waiting, items' and servers'."""
        if self._scope is not None:
            self._scope.cancel()
        for tally in list(self._items.values()) + list(self._servers.values()):
            self._flush(tally)
        self._items.clear()
        self._servers.clear()

    async def _run_in(self, scope: trio.CancelScope) -> None:
        """Writes each waiting progress once its interval is over (within two intervals of its arrival); ends
        when none waits (the next progress that waits starts it again)."""
        with scope:
            while self._waiting:
                await trio.sleep(self._interval)
                now = trio.current_time()
                for tally in [t for t in self._waiting if t.next_at <= now]:
                    self._waiting.discard(tally)
                    self._write_pending(tally, now)
        if self._scope is scope:
            self._scope = None

    def _flush(self, tally: Tally) -> None:
        self._waiting.discard(tally)
        if tally.pending is not None:
            self._write_pending(tally, trio.current_time())
        if tally.omitted:
            self._write_omitted(tally)

    def _write_omitted(self, tally: Tally) -> None:
        if tally.item is not None:
            said = f"{tally.omitted} more log messages, left out of the journal (the first {tally.logs} are in it)"
        else:
            said = (
                f"{tally.omitted} log messages left out of the journal (past the first {self._limit:,}, "
                f"{self._rate:g} a second are kept)"
            )
        level = LOG_LEVELS[tally.omitted_rank] if 0 <= tally.omitted_rank < len(LOG_LEVELS) else "info"
        self._log.note(
            LogMessage(
                server=tally.server,
                level=level,
                logger="mcp-run",
                data=said,
                step=tally.step,
                item=tally.item,
                omitted=tally.omitted,
            )
        )
        tally.omitted = 0
        tally.omitted_rank = -1

    def _write_pending(self, tally: Tally, now: float) -> None:
        p = tally.pending
        if p is not None:
            tally.pending = None
            tally.next_at = now + self._interval
            folded, tally.folded = tally.folded, 0
            self._write_progress(tally, p, folded)

    def _write_progress(self, tally: Tally, p: Progress, folded: int) -> None:
        step, item = tally.step, tally.item
        assert step is not None and item is not None
        noted = ProgressNoted(
            step=step, item=item, progress=p.progress, total=p.total, message=p.message, folded=folded or None
        )
        self._log.note(noted)
