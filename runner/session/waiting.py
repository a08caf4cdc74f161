"""The half of the session that sends a request and waits for its outcome: its write, its deadline, and what
giving up on it (a timeout, a cancellation) tells the server. Mixed into :class:`~runner.session.session.Session`,
whose state it uses; what the server sends is the session's to route.

Two ways, by transport. A transport whose ``send`` is awaited (HTTP: the POST returns with the response's
headers) is awaited inside a cancel scope carrying the call's deadline, which covers the send too. A transport
that queues its writes (stdio, :class:`~runner.transports.base.Queued`) gets the request without waiting: the
caller parks once, for its outcome, the writer tells ``PendingCall.written`` how the write ended, and the
call's deadline is kept by the session's :class:`~runner.session.deadlines.Deadlines` task.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

import trio

from runner.errors import CallTimeout, McpRunError, NotDelivered, OutcomeUnknown, TransportError
from runner.protocol.jsonrpc import Message, Notification, Request, RequestId
from runner.session.deadlines import Deadlines
from runner.session.era import Era
from runner.session.options import SessionOptions
from runner.session.pending import PendingCall, PendingCalls, Write
from runner.session.text import first_line
from runner.transports.base import Gate, Transport, Written

__all__ = ["CANCEL_NOTIFY_TIMEOUT", "Waiting"]

CANCEL_NOTIFY_TIMEOUT: Final = 5.0


class Waiting:
    """Sending a request and waiting for its outcome (see the module docstring)."""

    _transport: Transport
    _options: SessionOptions
    _nursery: trio.Nursery
    _pending: PendingCalls
    _queue: Callable[[Message, Written, Gate | None], Callable[[], bool]] | None
    _deadlines: Deadlines
    _broken: McpRunError | None
    _era: Era

    def _closed(self) -> NotDelivered:
        """The error of a request made on a session that broke or closed: surely not sent."""
        broken = self._broken
        assert broken is not None
        error = NotDelivered(
            f"{self._options.name}: connection is closed: {first_line(broken)}",
            stderr=broken.stderr if isinstance(broken, TransportError) else None,
        )
        error.__cause__ = broken
        return error

    async def _send_and_wait(self, request: Request, entry: PendingCall, gate: Gate | None = None) -> dict[str, Any]:
        """Send ``request`` (once ``gate`` opens, when given: see ``BeforeSend``) and wait for its outcome."""
        if self._broken is not None:  # it broke or closed while the caller awaited (a journal's fsync, say)
            raise self._closed()
        if self._queue is not None:
            return await self._queue_and_wait(request, entry, gate)
        if gate is not None and not gate.passed():
            await gate.wait()  # the dispatch record on disk before the request goes out
            if self._broken is not None:
                raise self._closed()
        rid = request.id
        self._pending.add(rid, entry)
        deadline = entry.first_deadline
        try:
            if deadline == math.inf:  # nothing can move a deadline that is not there: no scope to keep
                await self._send(request, entry)
                await entry.done.wait()
            else:
                # The deadline covers the send too: an HTTP POST returns only once the server sends headers,
                # which a server answering with JSON does when the tool is done.
                with trio.CancelScope(deadline=deadline) as scope:
                    entry.scope = scope
                    await self._send(request, entry)
                    await entry.done.wait()
            if not entry.done.is_set():
                await self._timed_out(rid, entry)
        except trio.Cancelled:
            await self._cancel_if_written(request, entry)
            raise
        finally:
            self._pending.remove(rid)
        return _result(entry)

    async def _queue_and_wait(self, request: Request, entry: PendingCall, gate: Gate | None) -> dict[str, Any]:
        """:meth:`_send_and_wait` where the transport queues writes: one park for the whole call (the write's
        outcome comes to ``entry.written``), no cancel scope (its deadline is kept by ``Deadlines``)."""
        rid = request.id
        timed = entry.deadline != math.inf
        if timed and not self._deadlines.started:
            self._start_deadlines()
        withdraw = self._enqueue(request, entry, gate)
        if timed:
            self._deadlines.add(entry)
        try:
            await entry.done.wait()
            if entry.expired:
                await self._expired(rid, entry, withdraw)
        except trio.Cancelled:
            if entry.write is Write.SENDING and withdraw():
                entry.end_write(written=False)
            else:
                await self._cancel_if_written(request, entry)
            raise
        finally:
            if timed:
                self._deadlines.remove(entry)
            self._pending.remove(rid)
        return _result(entry)

    def _start_deadlines(self) -> None:
        """Start the deadline keeper, before anything is queued (a closed nursery raises here)."""
        self._nursery.start_soon(self._deadlines.run)
        self._deadlines.started = True

    def _enqueue(self, request: Request, entry: PendingCall, gate: Gate | None = None) -> Callable[[], bool]:
        """Register the call and queue its write; returns the queue's withdraw (True: taken back unwritten)."""
        assert self._queue is not None
        self._pending.add(request.id, entry)
        entry.start_write()
        try:
            return self._queue(request, entry.written, gate)
        except BaseException:
            entry.end_write(written=False)
            self._pending.remove(request.id)
            raise

    async def _expired(self, rid: RequestId, entry: PendingCall, withdraw: Callable[[], bool]) -> None:
        """A queued call's deadline passed: one still unwritten is withdrawn (never sent), else it timed out."""
        if entry.write is Write.SENDING and withdraw():
            entry.end_write(written=False)
            raise self._not_written(entry)
        await self._timed_out(rid, entry)

    async def _cancel_if_written(self, request: Request, entry: PendingCall) -> None:
        """Tell the server a cancelled call is abandoned, when it was written and is still running."""
        if entry.write is Write.WRITTEN and not entry.done.is_set() and request.method != "initialize":
            with trio.CancelScope(shield=True):
                await self._notify_cancelled(request.id, "cancelled by the client")

    def _not_written(self, entry: PendingCall) -> NotDelivered:
        """``entry`` timed out before the writer took its line (the server was not reading what we sent): it was
        taken back, so the server never saw it and is not told to cancel it."""
        hard = trio.current_time() >= entry.timeout_at
        what = f"{entry.timeout:g} s timeout" if hard else f"{entry.idle:g} s idle timeout"
        return NotDelivered(
            f"{self._options.name}: {entry.method} request not sent within its {what} (the server was not reading "
            "its input); the server never saw it"
        )

    async def _timed_out(self, rid: RequestId, entry: PendingCall) -> None:
        """``entry`` got no outcome in time: tell the server (not for ``initialize``), raise ``CallTimeout``."""
        hard = trio.current_time() >= entry.timeout_at
        what = f"{entry.timeout:g} s timeout" if hard else f"no progress for {entry.idle:g} s"
        if entry.method == "initialize":  # never cancelled
            raise CallTimeout(f"{self._options.name}: no answer to initialize ({what})")
        await self._notify_cancelled(rid, "timeout")
        raise CallTimeout(
            f"{self._options.name}: {entry.method} got no result ({what}); cancellation sent", idle=not hard
        )

    async def _send(self, request: Request, entry: PendingCall) -> None:
        """Write ``request``. While the write is under way, a dying connection does not decide the call's
        fate (see :meth:`PendingCalls.fail_all`): the write's own outcome does."""
        entry.start_write()
        written = False
        try:
            await self._transport.send(request)
            written = True
        finally:
            entry.end_write(written=written)
        if self._broken is not None and not entry.done.is_set():
            name, reason = self._options.name, first_line(self._broken)
            error = OutcomeUnknown(
                f"{name}: connection lost after {entry.method} request {request.id} was sent: {reason}",
                stderr=self._broken.stderr if isinstance(self._broken, TransportError) else None,
            )
            error.__cause__ = self._broken
            entry.finish(None, error)

    async def _notify_cancelled(self, rid: RequestId, reason: str) -> None:
        """We gave up on ``rid``: tell the server (``notifications/cancelled``), then the transport, which may
        let go of what it holds for that request (an HTTP stream) whether or not the notification went out."""
        try:
            if self._broken is not None or not self._era.cancels_by_notification:
                return  # 2026-07-28 over HTTP: closing the response stream (abandon, below) is the cancellation
            with trio.move_on_after(CANCEL_NOTIFY_TIMEOUT):
                try:
                    await self._transport.send(
                        Notification("notifications/cancelled", {"requestId": rid, "reason": reason})
                    )
                except McpRunError as exc:
                    if self._options.on_warning is not None:
                        name = self._options.name
                        self._options.on_warning(
                            f"{name}: could not send cancellation for request {rid}: {first_line(exc)}"
                        )
        finally:
            self._transport.abandon(rid)


def _result(entry: PendingCall) -> dict[str, Any]:
    """The finished call's result, or its error raised."""
    if entry.error is not None:
        raise entry.error
    assert entry.result is not None
    return entry.result
