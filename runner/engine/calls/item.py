"""One item's tool call across its attempts: the scheduler's item path.

The call is checked against the server's tool list (:mod:`runner.engine.calls.tools`: an unknown tool or
arguments its schema refuses raise ``InvalidCall``, nothing sent). Each attempt asks the server's link for the
current session (waiting while the server is being reconnected), journals its dispatch before the request is
written (``before_send``: fsynced first unless the call is known to be safe to repeat, see
:mod:`runner.engine.journal.writer`; arguments JSON cannot carry raise ``InvalidCall`` before that, nothing journaled
or sent: :mod:`runner.session.sendable`), and classifies how it ended:

- a result (``isError`` or not) or a JSON-RPC error: the server answered; returned or raised;
- ``SessionExpired``: refused, not run (the server forgot the session, which the session renewed): sent
  again on the renewed session, ``RetryPolicy.renewed`` times, then the link is told;
- ``Throttled`` (a ``NotDelivered``: 429, or 503 with Retry-After): the server asked us to wait; the link pauses
  every call to it and lowers its pace (:mod:`runner.engine.calls.pace`), and the call goes out again once
  the gate lets it (within the server's ``reconnect`` budget: :meth:`ServerLink.throttled`);
- ``NotDelivered``: the request surely never reached the server; the link is told the connection is gone and
  the call goes out again on the next session (the link's reconnect budget bounds this);
- ``OutcomeUnknown``: sent, result lost; called again (after the backoff) only when the tool is safe to
  repeat and within ``RetryPolicy``, else raised (in doubt).

Which of these an error is, is :func:`runner.engine.calls.retry.classify`'s (the Temporal batch asks it too).
An attempt that ends without an answer after its dispatch was journaled gets an ``item_failed`` record with
``retrying: true`` before the next one, so the journal tells every attempt apart. A call cancelled after its
dispatch (the run is stopping) is journaled as ``cancelled``: in doubt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio

from runner.backoff import Backoff
from runner.engine.calls.current import CURRENT_ITEM
from runner.engine.calls.retry import RetryPolicy, Verdict, classify, failure_kind, wants_safety
from runner.engine.calls.servers import ServerLink
from runner.engine.calls.task import TaskCall, TaskSite, TaskUncollected, offers_tasks, wants_task_now
from runner.engine.core.events import ItemDispatched, ItemFailed, StreamResumed
from runner.engine.core.vocabulary import FailureKind
from runner.engine.journal.notes import Notes, Tally
from runner.engine.journal.writer import EventLog
from runner.errors import (
    JsonRpcError,
    McpRunError,
    NotDelivered,
    SessionExpired,
    Throttled,
    first_line,
)
from runner.protocol.mcp import Progress, ToolResult
from runner.protocol.tasks import TaskMode
from runner.session import Gate, Session
from runner.workflow.plan import PlannedStep

__all__ = ["CallSite", "Drained", "ItemCall"]


class Drained(McpRunError):
    """An interrupt arrived before the request was dispatched: the item did not run (nothing to record)."""


@dataclass(frozen=True, slots=True)
class CallSite:
    """What an item's call needs from the run: where to journal, the gate of its notifications (``notes``),
    how to pace and bound retries, the server's link, the concurrency limits, whether the run is draining, the
    table of calls in flight (which routes a server's log messages to their item), whether a call is safe to
    repeat (asking the server if need be: ``safe_to_repeat``; by what is known, without waiting:
    ``known_safe``), and the check a call passes before it is first sent (:mod:`runner.engine.calls.tools`:
    raises ``InvalidCall``)."""

    log: EventLog
    notes: Notes
    retry: RetryPolicy
    backoff: Backoff
    wait_for: Callable[[ServerLink], Awaitable[Session]]
    limits: tuple[trio.Semaphore, trio.Semaphore]
    draining: Callable[[], bool]
    in_flight: dict[tuple[str, Any], tuple[str, str]]
    safe_to_repeat: Callable[[PlannedStep], Awaitable[bool]]
    known_safe: Callable[[PlannedStep, Session], bool]
    check: Callable[[PlannedStep, dict[str, Any], Session], Awaitable[None]]
    tasks: TaskMode = "auto"  # the server's `tasks:` (runner.engine.calls.task)


async def _take(limit: trio.Semaphore) -> None:
    """A token of ``limit``: at once when one is free and nobody waits for one, else in line. Taken at once, it
    is no checkpoint: the call parks for its answer soon after, and a task switch per limit (and one for the
    session's ready event) cost 6% of a fan-out's instructions per item. The limits are plain semaphores: a
    ``CapacityLimiter`` also tracks who holds each token, which tripled the cost of a token and served nothing."""
    try:
        limit.acquire_nowait()
    except trio.WouldBlock:
        await limit.acquire()


class ItemCall:
    """The call of one item (see the module docstring): ``await ItemCall(...).run()``."""

    def __init__(
        self,
        site: CallSite,
        link: ServerLink,
        ps: PlannedStep,
        index: int | None,
        key: str,
        args: dict[str, Any],
        *,
        sent_before: bool = False,
    ) -> None:
        """``sent_before``: an earlier attempt of the run may have made this call (it was in doubt, and is
        made again by decision); it is not checked before sending, as a retry is not."""
        self._site = site
        self._sent_before = sent_before
        self._link = link
        self._ps = ps
        self._index = index
        self._key = key
        self._args = args
        self._attempt = 0
        self._dispatched: list[Any] = []  # request ids of the current attempt, once journaled
        self._taskcall: TaskCall | None = None  # the current attempt's, when it is made as a task
        self._session: Session | None = None  # the session of the current attempt
        self._tally: Tally | None = None  # the item's notifications (runner.engine.journal.notes), from the first one
        self._unknown = 0  # attempts whose outcome was unknown
        self._renewed = 0  # sessions the server forgot in a row (each renewed by the session)
        self._sent_at = 0.0  # when the current attempt passed the server's gate

    async def run(self) -> ToolResult:
        token = CURRENT_ITEM.set((self._ps.id, self._key))
        try:
            return await self._run()
        except TaskUncollected as exc:
            raise Drained(str(exc)) from exc  # the item stays dispatched with its task id: a resume collects it
        finally:
            CURRENT_ITEM.reset(token)

    async def collect(self, task_id: str) -> ToolResult:
        """The result of the task an earlier attempt journaled for this item (see :mod:`.taskcall`); raises
        ``TaskLost`` when the server no longer knows it, ``Drained`` when it cannot be collected now."""
        token = CURRENT_ITEM.set((self._ps.id, self._key))
        try:
            session = await self._site.wait_for(self._link)
            result = await self._task().collect(session, task_id)
        except TaskUncollected as exc:
            raise Drained(str(exc)) from exc
        finally:
            CURRENT_ITEM.reset(token)
        self._link.healthy()
        return result

    def _task(self) -> TaskCall:
        site, link = self._site, self._link

        async def next_session(old: Session, error: McpRunError) -> Session:
            if isinstance(error, NotDelivered) or old.broken is not None:
                link.lost(old, error)
            return await site.wait_for(link)

        return TaskCall(
            TaskSite(log=site.log, next_session=next_session, mode=site.tasks),
            (self._ps.id, self._key, self._index),
            timeout=self._ps.timeout,
        )

    async def _run(self) -> ToolResult:
        site, link = self._site, self._link
        started = trio.current_time()
        checked = self._sent_before
        while True:
            session = await site.wait_for(link)
            if not checked:
                # Against the session it is about to go out on; once: a later attempt repeats a call that was
                # already checked (and maybe sent), so its outcome is never turned into "not sent".
                checked = await self._checked(session)
                if not checked:
                    continue
            try:
                result = await self._one_attempt(session)
            except McpRunError as exc:
                if isinstance(exc, JsonRpcError):
                    link.healthy()  # it answered
                if not await self._again(session, exc, started):
                    raise
                continue
            link.healthy(sent_at=self._sent_at)
            return result

    async def _checked(self, session: Session) -> bool:
        """The call passes its check (``InvalidCall`` when refused); False when the server answered nothing
        (this session is no use; not sent)."""
        try:
            await self._site.check(self._ps, self._args, session)
        except Throttled as exc:
            if not await self._link.wait_out(exc, sent_at=trio.current_time()):
                raise
            return False
        except NotDelivered as exc:
            self._link.lost(session, exc)
            return False
        return True

    async def _again(self, session: Session, exc: McpRunError, started: float) -> bool:
        """Whether the call goes out again after its attempt on ``session`` raised ``exc``
        (:func:`~runner.engine.calls.retry.classify`); when it does, what the next attempt needs is done."""
        site = self._site
        safe, delay = False, 0.0
        if wants_safety(exc):
            self._unknown += 1
            delay = site.backoff.delay(self._unknown - 1)
            late = self._unknown >= site.retry.attempts or trio.current_time() + delay - started > site.retry.total
            if late:
                return False
            safe = await self._safe()
        verdict = classify(exc, sent=bool(self._dispatched), safe=safe)
        if verdict is Verdict.RESEND:
            return self._resend(session, exc)
        if verdict is not Verdict.REPEAT:
            return False
        if session.broken is not None:
            self._link.lost(session, exc)
        self._ended(exc, retry_in=delay)  # the views say "calling it again in ..."
        await trio.sleep(delay)
        return True

    def _resend(self, session: Session, exc: McpRunError) -> bool:
        """Before a request surely not delivered goes out again: a session the server forgot was renewed by the
        session (the link is told after ``RetryPolicy.renewed`` in a row); a call refused for now pauses the
        server (False: its ``reconnect`` budget is spent, the call is not sent again); any other, the link is
        told. True when it goes out again."""
        if isinstance(exc, SessionExpired):
            self._ended(exc)
            self._renewed += 1
            if self._renewed > self._site.retry.renewed:
                self._link.lost(session, exc)
                self._renewed = 0
            return True
        if isinstance(exc, Throttled):
            if not self._link.throttled(exc, sent_at=self._sent_at):
                return False
            self._ended(exc)  # (the link's line says how long the server is paused: not one line per item)
            return True
        self._link.lost(session, exc)
        self._ended(exc)
        return True

    async def _safe(self) -> bool:
        """Whether the call may be made again now that its outcome is unknown. Asked only then: listing a
        server's tools to read their annotations must never be what makes an item fail or wait."""
        try:
            return await self._site.safe_to_repeat(self._ps)
        except McpRunError:
            return False

    async def _one_attempt(self, session: Session) -> ToolResult:
        site, ps = self._site, self._ps
        self._attempt += 1
        self._dispatched.clear()
        self._taskcall = None
        self._session = session
        limit_all, limit_server = site.limits
        try:
            await _take(limit_all)
            try:
                await _take(limit_server)
                try:
                    self._sent_at = await self._link.gate.enter()
                except BaseException:
                    limit_server.release()
                    raise
                try:
                    if site.draining():
                        raise Drained("the run is being interrupted; not dispatching")
                    if offers_tasks(session) and await wants_task_now(session, ps.tool, mode=site.tasks):
                        self._taskcall = self._task()
                        return await self._taskcall.start(
                            session,
                            ps.tool,
                            self._args,
                            idle_timeout=ps.idle_timeout,
                            on_progress=self._on_progress,
                            before_send=self._before_send,
                            on_resumed=self._on_resumed,
                        )
                    return await session.call_tool(
                        ps.tool,
                        self._args,
                        timeout=ps.timeout,
                        idle_timeout=ps.idle_timeout,
                        on_progress=self._on_progress,
                        before_send=self._before_send,
                        on_resumed=self._on_resumed,
                    )
                finally:
                    self._link.gate.leave()
                    limit_server.release()
            finally:
                limit_all.release()
        except trio.Cancelled:
            if self._dispatched and (self._taskcall is None or self._taskcall.created is None):
                # (a call whose task id is journaled stays open: the task goes on, and a resume collects it)
                site.log.record(
                    ItemFailed(
                        step=ps.id,
                        item=self._key,
                        index=self._index,
                        kind=FailureKind.CANCELLED,
                        error="cancelled after it was sent (the run was stopping); the server may have done it",
                    )
                )
            raise
        finally:
            for rid in self._dispatched:
                site.in_flight.pop((ps.server, rid), None)

    def _ended(self, exc: McpRunError, *, retry_in: float | None = None) -> None:
        """Journal how a dispatched attempt ended, when another follows (the next journals its own dispatch);
        ``retry_in``: a call safe to repeat is made again after exactly that many seconds."""
        if self._dispatched:
            self._site.log.record(
                ItemFailed(
                    step=self._ps.id,
                    item=self._key,
                    index=self._index,
                    kind=failure_kind(exc),
                    error=first_line(exc),
                    retrying=True,
                    retry_in=round(retry_in, 3) if retry_in is not None else None,
                )
            )

    async def _before_send(self, rid: Any, token: Any) -> Gate | None:
        site, ps = self._site, self._ps
        if site.draining():
            raise Drained("the run is being interrupted; not dispatching")
        dispatched = ItemDispatched(
            step=ps.id,
            item=self._key,
            index=self._index,
            server=ps.server,
            tool=ps.tool,
            request_id=rid,
            progress_token=token,
            attempt=self._attempt,
        )
        gate = None
        if self._session is not None and site.known_safe(ps, self._session):
            # Safe to repeat: if a power loss takes this record, a resume calls the item again, which is
            # allowed. It is queued before the request goes out, so it precedes the result in the journal.
            site.log.append(dispatched)
        else:
            # On disk before the request's first byte is written: the session (its transport's writer) waits
            # for the gate, so this task parks once, for the call's outcome, and dispatches that become ready
            # together share one fsync.
            gate = site.log.stage(dispatched)
        self._dispatched.append(rid)
        site.in_flight[(ps.server, rid)] = (ps.id, self._key)
        return gate

    def _on_progress(self, p: Progress) -> None:
        tally = self._tally
        if tally is None:
            tally = self._tally = self._site.notes.tally(self._ps.id, self._key)
        self._site.notes.progress(tally, p)

    def _on_resumed(self, last_event_id: str) -> None:
        self._site.log.record(StreamResumed(step=self._ps.id, item=self._key, last_event_id=last_event_id))
