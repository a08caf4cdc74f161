"""The deadlines of a session's calls, kept by one task instead of a cancel scope per call.

A call whose request is queued (a transport with ``queue``, see :mod:`runner.transports.base`) waits for its
outcome in one park: no cancel scope around it, because entering and leaving a trio cancel scope with a
deadline cost more than the two task switches of the call itself. Its deadline goes into a heap; one task
sleeps until the earliest and ends the waits that ran out (``PendingCall.expire``). Progress pushes a call's
deadline back in the call itself (``PendingCall.deadline``): its place in the heap is corrected when it comes
up. Entries of calls removed (answered, failed, cancelled) stay in the heap until they come up or the heap is
rebuilt, when it holds more than twice the calls still watched: its size stays within a small multiple of the
calls in flight.
"""

from __future__ import annotations

import heapq
import math

import trio

from runner.session.pending import PendingCall

__all__ = ["Deadlines"]


class Deadlines:
    """One session's call deadlines; :meth:`run` is its task (started by the session on first use)."""

    __slots__ = ("_heap", "_live", "_scope", "_seq", "started")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, PendingCall]] = []
        self._seq = 0  # ties broken by arrival, never by comparing calls
        self._live = 0  # calls added and not yet removed
        self._scope: trio.CancelScope | None = None  # the task's sleep, while it sleeps
        self.started = False

    def add(self, call: PendingCall) -> None:
        """Watch ``call`` until :meth:`remove`: it expires at ``call.deadline`` (which may only move later)."""
        self._seq += 1
        self._live += 1
        call.watched = True
        heap = self._heap
        if len(heap) > 2 * self._live + 64:  # mostly calls removed: keep those still watched
            heap[:] = [item for item in heap if item[2].watched]
            heapq.heapify(heap)
        heapq.heappush(heap, (call.deadline, self._seq, call))
        scope = self._scope
        if scope is not None and call.deadline < scope.deadline:
            scope.deadline = call.deadline

    def remove(self, call: PendingCall) -> None:
        """``call`` ended: stop watching it (its heap entry is dropped lazily)."""
        self._live -= 1
        call.watched = False

    async def run(self) -> None:
        heap = self._heap
        while True:
            now = trio.current_time()
            while heap and heap[0][0] <= now:
                _, _, call = heapq.heappop(heap)
                if not call.watched or call.done.is_set():
                    continue
                if call.deadline > now:  # progress moved it
                    self._seq += 1
                    heapq.heappush(heap, (call.deadline, self._seq, call))
                    continue
                call.expire()
            with trio.CancelScope(deadline=heap[0][0] if heap else math.inf) as scope:
                self._scope = scope
                await trio.sleep_forever()
            self._scope = None
