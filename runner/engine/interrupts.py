"""The interrupt rules of a run: the first SIGINT/SIGTERM drains (nothing new is dispatched, calls in flight
have ``grace`` seconds), the second (or the end of the grace period) cancels the calls in flight, a third exits
at once. Each signal asks the journal for an fsync first: the machine may be going down."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Protocol

import trio

from runner.exitcodes import ExitCode

__all__ = ["signal_exit_code", "watch_signals"]


class Stoppable(Protocol):
    """The scheduler, as the interrupt rules see it."""

    def drain(self) -> None: ...

    def cancel(self) -> None: ...


class Syncable(Protocol):
    """The journal, as the interrupt rules see it."""

    def sync_soon(self) -> None: ...


def signal_exit_code(signals: list[int]) -> ExitCode:
    """The exit code the first signal of a run asks for."""
    return ExitCode.SIGINT if signals[0] == signal.SIGINT else ExitCode.SIGTERM


async def watch_signals(
    scheduler: Stoppable, log: Syncable, grace: float, signals: list[int], error: Callable[[str], None]
) -> None:
    """Apply the rules (the module docstring) to each signal as it comes, appending it to ``signals``."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as receiver:
        async for signum in receiver:
            signals.append(signum)
            log.sync_soon()  # the machine may be shutting down: what the journal has goes to disk now
            if len(signals) == 1:
                error(
                    f"interrupted: dispatching nothing new; calls in flight have {grace:g} s to finish "
                    "(interrupt again to cancel them now)"
                )
                scheduler.drain()

                async def after_grace() -> None:
                    await trio.sleep(grace)
                    scheduler.cancel()

                trio.lowlevel.spawn_system_task(after_grace)
            elif len(signals) == 2:
                error("interrupted again: cancelling calls in flight")
                scheduler.cancel()
            else:
                os._exit(130 if signals[0] == signal.SIGINT else 143)
