"""The write-ahead rule on Temporal: dispatch markers kept in the activity's heartbeat details.

Before an item's request is written, :meth:`Markers.dispatched` adds its key to the markers and waits until
a heartbeat carrying them has been *recorded by the Temporal server* (an awaited
``RecordActivityTaskHeartbeat``, not the SDK's throttled background heartbeat). Items that ask while a
heartbeat is on its way share the next one: a batch's markers are group-committed. How an item ended is
added too (:meth:`Markers.ended`), and goes out with the next heartbeat.

A later attempt of the activity (the worker died, the heartbeat timed out) starts from the last recorded
details (:meth:`Markers.restore`): an item that ended is not called again (its outcome is reused); an item
marked dispatched without an end may have reached the server: it is in doubt unless safe to repeat.

Each heartbeat carries the whole set, so the last one recorded is the truth; one heartbeat is in flight at a
time, so an older set never overwrites a newer one.

**The keeper** (:meth:`Markers.keep_alive`) beats on a fixed interval whatever the calls do (waiting for a
concurrency slot, or for a slow answer). Two parties must hear it: the Temporal server (the awaited heartbeat)
and the worker's own SDK core, which times an activity out *locally* (cancels it) when the activity has not
heartbeated through the worker for the heartbeat timeout plus a few seconds; awaited heartbeats go around the
core, so without this a batch running longer than that was cancelled mid-call on a live worker and its call
in flight came back in doubt. So each keeper beat first hands the same details to the core (``alive``: the
SDK's ``activity.heartbeat``), then records them, holding the one-in-flight slot: the core's copy is never
older than what the server has when it was handed over.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from runner.temporal.progress import ProgressBoard

__all__ = ["Markers"]

Commit = Callable[[dict[str, Any]], Awaitable[None]]
Alive = Callable[[dict[str, Any]], None]


class Markers:
    """The markers of one attempt of one batch activity (trio side). ``commit`` records a heartbeat with the
    given details and returns once the server has it."""

    def __init__(
        self, commit: Commit, prior: Any = None, progress: ProgressBoard | None = None, *, alive: Alive | None = None
    ) -> None:
        self._commit = commit
        self._alive = alive
        self.progress = progress if progress is not None else ProgressBoard()
        self._dispatched: set[str] = set()
        self._ended: dict[str, dict[str, Any]] = {}
        self._version = 0  # bumped by every change
        self._recorded = 0  # the version the server has
        self._flushing = False
        self._flushed = trio.Event()
        self.heartbeats = 0
        self.beats = 0  # the keeper's beats handed to the worker's core
        self.restore(prior)

    def restore(self, details: Any) -> None:
        """Start from the details of the last heartbeat an earlier attempt recorded (ignored when malformed:
        they are only ever written by this module)."""
        if not isinstance(details, dict):
            return
        dispatched = details.get("dispatched")
        ended = details.get("ended")
        if isinstance(dispatched, list):
            self._dispatched.update(k for k in dispatched if isinstance(k, str))
        if isinstance(ended, dict):
            self._ended.update((k, v) for k, v in ended.items() if isinstance(v, dict))

    def details(self) -> dict[str, Any]:
        """What a heartbeat carries: keys dispatched without an end yet, the ends, and the latest progress of
        items still running (when any)."""
        details: dict[str, Any] = {
            "dispatched": sorted(self._dispatched - self._ended.keys()),
            "ended": dict(self._ended),
        }
        progress = self.progress.details()
        if progress:
            details["progress"] = progress  # the latest per item still running (runner.temporal.progress)
        return details

    def was_dispatched(self, key: str) -> bool:
        """An earlier attempt marked it dispatched and recorded no end: it may have reached the server."""
        return key in self._dispatched and key not in self._ended

    def ended_before(self, key: str) -> dict[str, Any] | None:
        return self._ended.get(key)

    async def dispatched(self, key: str) -> None:
        """Mark ``key`` dispatched; returns once a heartbeat with the mark is recorded. An end an earlier
        attempt recorded (a ``retry``: not sent) is dropped, or the heartbeat would carry no mark."""
        self._ended.pop(key, None)
        self._dispatched.add(key)
        self._version += 1
        await self.flush()

    def ended(self, key: str, outcome: dict[str, Any]) -> None:
        """How ``key`` ended; recorded with the next heartbeat."""
        self._ended[key] = outcome
        self._version += 1

    async def flush(self, *, beat: bool = False) -> None:
        """Returns once the server has every change made before the call (one heartbeat in flight at a time;
        those who wait meanwhile share the next). ``beat``: the heartbeat that records them is handed to the
        worker's core as well (the keeper's)."""
        target = self._version
        while self._recorded < target:
            if self._flushing:
                await self._flushed.wait()
                continue
            self._flushing = True
            version = self._version
            try:
                details = self.details()
                if beat and self._alive is not None:
                    self._alive(details)  # before the server records them: never older than what it has
                    self.beats += 1
                await self._commit(details)
                self.heartbeats += 1
                self._recorded = max(self._recorded, version)
            finally:
                self._flushing = False
                self._flushed.set()
                self._flushed = trio.Event()

    async def nudge(self) -> None:
        """A heartbeat for progress alone: skipped while one is in flight (that one, or the next marker's,
        carries it), so it never delays a marker by more than the one heartbeat it may already be waiting on."""
        if self._flushing:
            return
        self._version += 1
        await self.flush()

    async def keep_alive(self, every: float) -> None:
        """The keeper: a heartbeat every ``every`` seconds, to the server and to the worker's core, whatever
        the calls are doing (so neither takes a slow but live worker for dead; a killed worker's beats stop);
        runs until cancelled."""
        while True:
            await trio.sleep(every)
            self._version += 1
            await self.flush(beat=True)
