"""Where a journal's disk work (writes and fsyncs) runs: in the trio thread while the disk is quick, else in one
long-lived thread of its own.

The event log's writer task hands it one job at a time (:meth:`DiskThread.run`) and waits for it. A hand-off to
the thread costs a queue put, the thread's wake-up, its answer through the run's trio token (``run_sync_soon``)
and two more task steps: about 180k instructions (cachegrind), more than a quick fsync (0.1-0.5 ms on a local
SSD) costs by keeping the trio thread waiting, since with calls not safe to repeat in flight the run mostly
waits for that fsync anyway (each call waits for its dispatch record). So jobs run inline while an inline job
typically takes less than ``inline_under`` (5 ms of wall time; typically: a moving average over the last eight
or so, so that the odd slow fsync of a busy machine sends nothing away). Once they typically take longer (a slow
disk, a network file system) the next ``slow_jobs`` (20) go to the thread, where the trio thread goes on
meanwhile, then one is tried inline again: quick ones bring the jobs back. A job that raised sends the next
ones to the thread too. Either way, whatever the run emits while a job runs piles up in the event log's buffer
and goes out in the next job: groups form by design.

The wait for a job is shielded from cancellation: a job that has started always finishes before its caller
moves on (the file descriptor it writes to is closed only after that).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import trio

__all__ = ["DiskThread"]

_Job = tuple[Callable[..., None], tuple[Any, ...], Callable[[BaseException | None], None]]

INLINE_UNDER = 0.005  # seconds of wall time: inline jobs typically slower than this send the next ones to the thread
SLOW_JOBS = 20  # jobs that go to the thread then


class DiskThread:
    """Runs ``fn(*args)`` jobs one at a time, inline while they are quick, else in a thread of its own (see the
    module docstring; ``inline_under=0``: in the thread but for one job in ``slow_jobs + 1``; ``clock``: what
    times an inline job). :meth:`start` in a trio run (it takes the run's token), :meth:`stop` when done (the
    thread ends after the job it has)."""

    def __init__(
        self,
        name: str = "mcp-run journal",
        *,
        inline_under: float = INLINE_UNDER,
        slow_jobs: int = SLOW_JOBS,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._name = name
        self._inline_under = inline_under
        self._slow_jobs = slow_jobs
        self._clock = clock
        self._typical = 0.0  # how long an inline job takes, a moving average (seconds)
        self._threaded = 0  # jobs to run in the thread before one is tried inline again
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
        """``fn(*args)``, inline or in the thread; returns when it has returned, or raises what it raised. Inline,
        it is no checkpoint (the writer's wait for its next job is one)."""
        if self._thread is None:
            raise RuntimeError("DiskThread.run before start")
        if not self._threaded:
            started = self._clock()
            self._threaded = self._slow_jobs  # if fn raises, too: a failing disk is no quick one
            fn(*args)
            self._typical += (self._clock() - started - self._typical) / 8
            if self._typical < self._inline_under:
                self._threaded = 0
            return
        self._threaded -= 1
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
