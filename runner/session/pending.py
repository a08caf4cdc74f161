"""The calls awaiting their response: one slot per request id, filled by the reader, awaited by the caller.

Each call's write has an explicit state, because it decides what a dying connection means for the call::

    UNSENT ──start_write()──> SENDING ──end_write(written=True)──> WRITTEN
       ^                         │
       └──end_write(written=False)┘   (the transport's send raised: surely not delivered)

When the connection dies, ``fail_all`` fails every waiting call with the kind that matches its write:
``NotDelivered`` while UNSENT, ``OutcomeUnknown`` once WRITTEN; a call still SENDING is left to its own
write (``NotDelivered`` if it fails, ``OutcomeUnknown`` if it completes: the session checks after an awaited
send; a queued one's ``written`` does it, with the error ``fail_all`` left in ``lost``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from typing import Any

import trio

from runner.errors import McpRunError, NotDelivered, OutcomeUnknown, TransportError
from runner.protocol.jsonrpc import RequestId
from runner.protocol.mcp import Progress
from runner.session.options import ProgressHandler
from runner.session.text import first_line

__all__ = ["PendingCall", "PendingCalls", "Write"]


class Write(enum.Enum):
    """How far the request of a call got (see the module docstring)."""

    UNSENT = "unsent"
    SENDING = "sending"
    WRITTEN = "written"


class PendingCall:
    """One request awaiting its response. ``timeout`` is the hard cap from now, ``idle_timeout`` the time
    allowed without progress (each progress notification pushes it back, never past the hard cap)."""

    __slots__ = (
        "deadline",
        "done",
        "error",
        "expired",
        "first_deadline",
        "idle",
        "lost",
        "method",
        "on_progress",
        "on_resumed",
        "result",
        "scope",
        "timeout",
        "timeout_at",
        "watched",
        "write",
    )

    def __init__(
        self,
        method: str,
        *,
        timeout: float | None = None,
        idle_timeout: float | None = None,
        on_progress: ProgressHandler | None = None,
        on_resumed: Callable[[str], None] | None = None,
    ) -> None:
        self.method = method
        self.on_progress = on_progress
        self.on_resumed = on_resumed
        self.write = Write.UNSENT
        self.done = trio.Event()
        self.result: dict[str, Any] | None = None
        self.error: McpRunError | None = None
        now = trio.current_time()
        self.timeout = timeout
        self.timeout_at = now + timeout if timeout is not None else math.inf
        self.idle = idle_timeout
        # When the call times out if no progress comes (inf: never).
        self.first_deadline = self.timeout_at if idle_timeout is None else min(self.timeout_at, now + idle_timeout)
        # The scope the caller waits in, once it has one: progress moves its deadline.
        self.scope: trio.CancelScope | None = None
        # Without a scope, the session's :class:`~runner.session.deadlines.Deadlines` keeps it: progress moves
        # ``deadline``, and ``expire`` ends the wait.
        self.deadline = self.first_deadline
        self.expired = False
        self.watched = False  # in that keeper's heap, from its ``add`` to its ``remove``
        # The connection died while the request was being written: the outcome if the write completes.
        self.lost: OutcomeUnknown | None = None

    def start_write(self) -> None:
        if self.write is not Write.UNSENT:
            raise RuntimeError(f"a {self.method} request is written once ({self.write.value})")
        self.write = Write.SENDING

    def end_write(self, *, written: bool) -> None:
        if self.write is not Write.SENDING:
            raise RuntimeError(f"no write of the {self.method} request is under way ({self.write.value})")
        self.write = Write.WRITTEN if written else Write.UNSENT

    def progressed(self, progress: Progress) -> None:
        """A progress notification for this call: push back its idle deadline, tell its owner."""
        if self.idle is not None:
            self.deadline = min(self.timeout_at, trio.current_time() + self.idle)
            if self.scope is not None:
                self.scope.deadline = self.deadline
        if self.on_progress is not None:
            self.on_progress(progress)

    def written(self, failure: NotDelivered | None) -> None:
        """How the write of a queued request ended (called by the transport's writer): ``failure`` when its line
        did not go out whole (surely not delivered), None when it did."""
        if self.write is Write.SENDING:  # (a timeout may have withdrawn it meanwhile)
            self.end_write(written=failure is None)
        if failure is not None:
            self.finish(None, failure)
        elif self.lost is not None:
            self.finish(None, self.lost)

    def expire(self) -> None:
        """The deadline passed with no outcome: the caller's wait ends, and it reports the timeout."""
        if not self.done.is_set():
            self.expired = True
            self.done.set()

    def finish(self, result: dict[str, Any] | None, error: McpRunError | None) -> None:
        """The call's outcome: the first one set wins."""
        if not self.done.is_set():
            self.result = result
            self.error = error
            self.done.set()


class PendingCalls:
    """The calls awaiting their response, by request id."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls: dict[RequestId, PendingCall] = {}

    def add(self, rid: RequestId, call: PendingCall) -> None:
        self._calls[rid] = call

    def remove(self, rid: RequestId) -> None:
        del self._calls[rid]

    def get(self, rid: RequestId) -> PendingCall | None:
        return self._calls.get(rid)

    def fail_all(self, exc: McpRunError, *, name: str, what: str) -> None:
        """The connection is gone (``exc``): fail every call as its write says (see the module docstring).
        ``what`` names the event in the messages: ``connection lost``, ``session closed``."""
        stderr = exc.stderr if isinstance(exc, TransportError) else None
        reason = first_line(exc)
        for rid, call in list(self._calls.items()):
            if call.write is Write.SENDING:
                # Decided by its write: NotDelivered if it fails, this if it completes (see ``written``).
                call.lost = OutcomeUnknown(
                    f"{name}: {what} after {call.method} request {rid} was sent: {reason}", stderr=stderr
                )
                call.lost.__cause__ = exc
                continue
            if call.write is Write.WRITTEN:
                err: McpRunError = OutcomeUnknown(
                    f"{name}: {what} after {call.method} request {rid} was sent: {reason}", stderr=stderr
                )
            else:
                err = NotDelivered(
                    f"{name}: {what} before {call.method} request {rid} was sent: {reason}", stderr=stderr
                )
            err.__cause__ = exc
            call.finish(None, err)
