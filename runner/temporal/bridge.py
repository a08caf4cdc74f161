"""The worker's one long-lived trio thread, and the two ways across.

temporalio is asyncio; mcp-run's sessions are trio. A worker process starts one :class:`TrioThread`, which
holds the sessions (one per server) for every activity: ``await thread.run(fn, *args)`` runs a trio
function there from asyncio (handed over with the trio token; its result comes back with
``call_soon_threadsafe``), and ``await thread.to_asyncio(coro_factory)`` runs an asyncio coroutine on the
worker's loop from the trio thread (the dispatch markers are heartbeats, which are asyncio). Starting trio
per activity cost 32-824 ms per item in the prototype; crossing here costs a fraction of a millisecond.

Cancelling the asyncio side cancels the trio function (its cancel scope); an exception of the trio function
is raised on the asyncio side.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future as ThreadFuture
from typing import Any, TypeVar

import trio

__all__ = ["TrioThread"]

T = TypeVar("T")


class TrioThread:
    """A trio loop in a daemon thread, with a nursery that lives until :meth:`stop`."""

    def __init__(self, name: str = "mcp-run-trio") -> None:
        self._name = name
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._stop: trio.Event | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.on_stop: list[Callable[[], Awaitable[None]]] = []  # run in the trio thread before it ends

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name=self._name, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:  # reported to start(), or kept for stop()
            self._error = exc
        finally:
            self._ready.set()
            self._stopped.set()

    async def _serve(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._ready.set()
            await self._stop.wait()
            for hook in self.on_stop:
                with trio.move_on_after(5):
                    await hook()
            nursery.cancel_scope.cancel()

    def stop(self, timeout: float = 10.0) -> None:
        """End the thread: the stop hooks run (sessions close), then every task is cancelled."""
        if self._token is None or self._stop is None or self._stopped.is_set():
            return
        try:
            self._token.run_sync_soon(self._stop.set)
        except trio.RunFinishedError:
            return
        self._stopped.wait(timeout)

    @property
    def nursery(self) -> trio.Nursery:
        """The thread's nursery (for use from inside the trio thread only)."""
        assert self._nursery is not None, "start() first"
        return self._nursery

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``await fn(*args)`` in the trio thread, from asyncio."""
        token, nursery = self._token, self._nursery
        if token is None or nursery is None or self._stopped.is_set():
            raise RuntimeError("the trio thread is not running")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        scopes: list[trio.CancelScope] = []

        def settle(value: Any, error: BaseException | None, cancelled: bool) -> None:
            if future.done():
                return
            if cancelled:
                future.cancel()
            elif error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

        async def task() -> None:
            with trio.CancelScope() as scope:
                scopes.append(scope)
                try:
                    value = await fn(*args)
                except Exception as exc:
                    loop.call_soon_threadsafe(settle, None, exc, False)
                    return
                loop.call_soon_threadsafe(settle, value, None, False)
                return
            loop.call_soon_threadsafe(settle, None, None, True)  # cancelled in the trio thread

        token.run_sync_soon(nursery.start_soon, task)
        try:
            return await future
        except asyncio.CancelledError:

            def cancel() -> None:
                for scope in scopes:
                    scope.cancel()

            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(cancel)
            raise

    async def to_asyncio(self, loop: asyncio.AbstractEventLoop, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``await make()`` on the asyncio ``loop``, from the trio thread."""
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()
        future: ThreadFuture[T] = asyncio.run_coroutine_threadsafe(make(), loop)

        def wake(_: ThreadFuture[T]) -> None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(done.set)

        future.add_done_callback(wake)
        try:
            await done.wait()
        except trio.Cancelled:
            future.cancel()
            raise
        return future.result()
