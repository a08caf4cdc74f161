"""One long-lived thread that does a journal's disk work (writes and fsyncs) for the trio thread.

The event log's writer task hands it one job at a time (:meth:`DiskThread.run`) and waits for it; the
thread answers through the run's trio token (``run_sync_soon``), so a hand-off costs a queue put and a
wake-up, with no thread started or taken from a pool per job. While a job (an fsync) runs, whatever the
run emits piles up in the event log's buffer and goes out in the next job: groups form by design.

The wait for a job is shielded from cancellation: a job that has started always finishes before its caller
moves on (the file descriptor it writes to is closed only after that).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import trio

__all__ = ["DiskThread"]

_Job = tuple[Callable[..., None], tuple[Any, ...], Callable[[BaseException | None], None]]


class DiskThread:
    """Runs ``fn(*args)`` jobs in one thread of its own, one at a time. :meth:`start` in a trio run (it takes
    the run's token), :meth:`stop` when done (the thread ends after the job it has)."""

    def __init__(self, name: str = "mcp-run journal") -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._token: trio.lowlevel.TrioToken | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Let the thread end (it never waits on the trio thread, so this cannot hang either)."""
        self._jobs.put(None)

    async def run(self, fn: Callable[..., None], *args: Any) -> None:
        """``fn(*args)`` in the thread; returns when it has returned, or raises what it raised."""
        if self._thread is None:
            raise RuntimeError("DiskThread.run before start")
        done = trio.Event()
        result: list[BaseException | None] = []

        def finish(error: BaseException | None) -> None:  # in the trio thread
            result.append(error)
            done.set()

        self._jobs.put((fn, args, finish))
        with trio.CancelScope(shield=True):
            await done.wait()
        if result[0] is not None:
            raise result[0]

    def _loop(self) -> None:
        assert self._token is not None
        while (job := self._jobs.get()) is not None:
            fn, args, finish = job
            error: BaseException | None = None
            try:
                fn(*args)
            except BaseException as exc:  # handed back to the trio thread, which raises it
                error = exc
            try:
                self._token.run_sync_soon(finish, error)
            except trio.RunFinishedError:
                return
