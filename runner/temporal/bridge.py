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
        self._watchers: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[BaseException | None]]] = []
        self._lock = threading.Lock()

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
            with self._lock:
                self._stopped.set()
                watchers, self._watchers = self._watchers, []
            for loop, future in watchers:
                with contextlib.suppress(RuntimeError):  # that loop is closed
                    loop.call_soon_threadsafe(_settle, future, self._error)

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

    def ended(self) -> asyncio.Future[BaseException | None]:
        """Done, on the running asyncio loop, when the thread has ended: with the exception that ended it (a
        task of its nursery failed: every later :meth:`run` fails), or None (:meth:`stop`)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[BaseException | None] = loop.create_future()
        with self._lock:
            if self._stopped.is_set():
                future.set_result(self._error)
            else:
                self._watchers.append((loop, future))
        return future

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
            done: list[T] = []
            error: BaseException | None = None
            try:
                with trio.CancelScope() as scope:
                    scopes.append(scope)
                    done.append(await fn(*args))
            except Exception as exc:  # also one raised while being cancelled (the scope took the Cancelled out)
                error = exc
            except BaseExceptionGroup as group:  # the thread is stopping: its Cancelled goes on, the rest is the error
                error, rest = group.split(Exception)
                if rest is not None:
                    raise rest from None
            finally:  # the asyncio side always hears: a value, an error, or cancelled (here or by stop())
                with contextlib.suppress(RuntimeError):  # its loop is closed: no one is waiting
                    loop.call_soon_threadsafe(settle, done[0] if done else None, error, not done and error is None)

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


def _settle(future: asyncio.Future[BaseException | None], error: BaseException | None) -> None:
    if not future.done():
        future.set_result(error)
