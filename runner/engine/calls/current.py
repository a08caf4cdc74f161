"""Which item the current task is calling for: what a request's trace hangs from (:mod:`runner.engine.telemetry`).

A worker makes many items' calls one after the other, so :class:`~runner.engine.calls.item.ItemCall` sets it
around each call; a server's link clears it in its own task (started by whichever item first needed the server,
whose context a new trio task copies): the session's own requests are no item's.
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["CURRENT_ITEM"]

CURRENT_ITEM: ContextVar[tuple[str, str] | None] = ContextVar("CURRENT_ITEM", default=None)
"""(step id, item key) of the call under way in this task; None outside an item's call."""
