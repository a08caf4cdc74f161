"""``mcp-run worker --engine temporal``: a worker process (any number, on any machines).

It hosts the DAG workflow (:mod:`runner.temporal.dag`) and the call activity
(:mod:`runner.temporal.activities`) on a task queue, with one trio thread (:mod:`runner.temporal.bridge`)
holding one session per server for every activity of the process, and each server's ``max_concurrency``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from temporalio.client import Client
from temporalio.worker import Worker

from runner.engine.telemetry import from_env as tracing_from_env
from runner.errors import McpRunError, first_line
from runner.temporal.activities import CORE_THROTTLE, CallActivities
from runner.temporal.batch import Sessions
from runner.temporal.bridge import TrioThread
from runner.temporal.client import TemporalUnreachable, connect
from runner.temporal.dag import DagWorkflow
from runner.temporal.fanout import FanOutWorkflow
from runner.temporal.lost import first_words
from runner.temporal.tracing import interceptor

if TYPE_CHECKING:
    from runner.engine.telemetry.otel import Tracing

__all__ = ["DEFAULT_TASK_QUEUE", "serve", "start_worker"]

DEFAULT_TASK_QUEUE: Final = "mcp-run"
MAX_ACTIVITIES: Final = 64  # call activities one worker runs at once (each a batch of up to 100 items)


def start_worker(
    client: Client, task_queue: str, *, max_activities: int = MAX_ACTIVITIES, tracing: Tracing | None = None
) -> tuple[Worker, TrioThread]:
    """A worker (not yet running) and its started trio thread; stop the thread after the worker. ``tracing``:
    the spans of its items and requests (:mod:`runner.temporal.tracing`), and Temporal's interceptor."""
    thread = TrioThread()
    thread.start()
    sessions = Sessions(thread.nursery, tracer=tracing.request if tracing is not None else None)

    async def close() -> None:
        sessions.close()

    thread.on_stop.append(close)
    activities = CallActivities(thread, sessions, tracing=tracing)
    worker = Worker(
        client,
        task_queue=task_queue,
        interceptors=[interceptor(tracing)] if tracing is not None else [],
        workflows=[DagWorkflow, FanOutWorkflow],
        activities=[activities.call_batch, activities.slice_keys, activities.reconcile],
        max_concurrent_activities=max_activities,
        max_heartbeat_throttle_interval=CORE_THROTTLE,  # the keeper's beats go out as handed over (.markers)
    )
    return worker, thread


async def serve(address: str, task_queue: str, *, ready: Callable[[], None] | None = None) -> None:
    """Run a worker until cancelled (Ctrl-C) or, in the main thread, until SIGTERM (what a service manager
    sends): then the worker shuts down as on Ctrl-C, its stdio servers stopped, and this returns."""
    client = await connect(address)
    tracing = tracing_from_env(os.environ, warn=lambda text: print(f"mcp-run worker: {text}", file=sys.stderr))
    worker, thread = start_worker(client, task_queue, tracing=tracing)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    main = threading.current_thread() is threading.main_thread()
    if main:
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    ended: asyncio.Future[Any] = thread.ended()  # (Any: asyncio.wait takes futures of one type)
    stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    try:
        async with worker:
            if ready is not None:
                ready()
            await asyncio.wait([stopping, ended], return_when=asyncio.FIRST_COMPLETED)
            if ended.done():  # a bug: every activity would fail here; another worker (or this one restarted) can serve
                error = ended.result()
                why = first_words(error) if error is not None else "it stopped"
                raise McpRunError(f"the worker's session thread ended ({why}): the worker stops; start it again")
    except RuntimeError as exc:  # the SDK's "Worker failed": its pollers gave up (Temporal gone for too long)
        cause = exc.__cause__ or exc
        raise TemporalUnreachable(f"the worker stopped, Temporal at {address} lost: {first_line(cause)}") from None
    finally:
        stopping.cancel()
        if main:
            loop.remove_signal_handler(signal.SIGTERM)
        thread.stop()
        if tracing is not None:
            tracing.shutdown()  # what is buffered (bounded by the exporter's timeout)
