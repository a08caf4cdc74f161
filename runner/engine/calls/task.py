"""A tool call the server takes as a task: journal its id, poll it, collect its result; on resume, collect.

:class:`TaskCall` is what :class:`~runner.engine.calls.item.ItemCall` runs instead of a plain ``tools/call`` when
the server and the tool allow a task (:func:`wants_task_now`; the rule is
:func:`runner.protocol.tasks.wants_task`). In order:

1. ``tools/call`` with ``params.task`` (its dispatch journaled first, as any call's). A server that runs the
   tool at once answers with the result: done.
2. The task id is journaled (``task_created``) and fsynced **before** anything else: from here a crash loses
   nothing, because a resume polls the task (:meth:`TaskCall.collect`) instead of putting the item in doubt.
3. ``tasks/get`` every ``pollInterval`` (bounded, :func:`runner.protocol.tasks.poll_delay`). Each change of
   status or status message is journaled (``task_status``) and shown; progress notifications of the
   original call's token keep reaching the item's progress.
4. ``completed``: ``tasks/result`` is the call's result. ``failed``: ``tasks/result`` too, a tool error.
   ``cancelled`` (by the server or someone else): in doubt (the tool may have done part of its work).
   ``input_required``: a 2026-07-28 task's questions (``inputRequests``) are answered by the session's
   answer policy with ``tasks/update``, each once (a refused one, sampling, cancels the task and fails the
   item); a 2025 task waits, with a status that says so (``on_input_required`` is the seam for answering it
   through ``tasks/result``), polling until the timeout.

How it can end otherwise:

- a lost connection while polling is no loss: ``tasks/get`` is safe to repeat, so the link reconnects and
  polling goes on on the next session. If the server cannot be reached again (or the run is being
  interrupted), :class:`TaskUncollected`: nothing is journaled, the item stays dispatched with its task id,
  and a resume collects it;
- the server no longer knows the task (-32602): :class:`TaskLost`, in doubt, with a message saying so;
- the task outlives its ttl: :class:`TaskUnfinished`, in doubt (the server may drop it any time);
- the call's ``timeout`` runs out, or the run is cancelled (a second interrupt): ``tasks/cancel`` is sent,
  and the item is in doubt (timeout, cancelled) as any call's would be.

The step's ``timeout`` bounds the whole call, from ``tools/call`` to the result. ``idle_timeout`` bounds the
first request only (the task is created at once); polls are bounded by ``POLL_TIMEOUT`` each.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypedDict

import trio

from runner.engine.core.events import TaskCreated, TaskUpdated
from runner.engine.journal.writer import EventLog
from runner.errors import (
    CallTimeout,
    ConnectFailed,
    JsonRpcError,
    MalformedMessage,
    McpRunError,
    NotDelivered,
    OutcomeUnknown,
    TransportError,
    first_line,
)
from runner.protocol.mcp import ToolResult
from runner.protocol.tasks import TASK_NOT_FOUND, Task, TaskMode, TaskStatus, poll_delay
from runner.protocol.tasks2026 import new_input_requests, update_params
from runner.session import BeforeSend, Gate, ProgressHandler, Session
from runner.session.input_required import answer_input_requests
from runner.session.tasks import TASKS_2025, TaskCallOptions, TaskWire
from runner.session.tasks2026 import TASKS_2026

__all__ = [
    "POLL_TIMEOUT",
    "InputHandler",
    "TaskCall",
    "TaskLost",
    "TaskSite",
    "TaskUncollected",
    "TaskUnfinished",
    "offers_tasks",
    "wants_task_now",
    "wire_for",
]

POLL_TIMEOUT: Final = 60.0
"""Seconds one ``tasks/get`` (or ``tasks/result`` of a terminal task) may take."""
INPUT_WAITING: Final = "waiting for input, which mcp-run does not give (yet); polling until the timeout"

InputHandler = Callable[[Session, Task], Awaitable[None]]
"""Called when a task asks for input (``input_required``), once per such status: the seam for a policy that
answers (in 2025-11-25 by reading ``tasks/result``, which relays the server's requests)."""


class TaskLost(OutcomeUnknown):
    """The server does not know the task (any more): its result is lost; the tool may have run."""


class TaskUnfinished(OutcomeUnknown):
    """The task ended without a result (cancelled by someone else), or outlived its ttl."""


class TaskUncollected(McpRunError):
    """The task may still be running, and its result could not be collected now (its server cannot be
    reached, or the run is being interrupted). Nothing is journaled: a resume collects it."""


@dataclass(frozen=True, slots=True)
class TaskSite:
    """What a task call needs of the run: the journal, and ``next_session(old, error)``, which tells the
    server's link that ``old`` failed with ``error`` and waits for the session to poll on next (raising an
    ``McpRunError`` when there is none: the server is gone, the run is being interrupted). ``wire``: how to
    speak tasks (:mod:`runner.session.tasks`, :mod:`runner.session.tasks2026`); by default the session's
    era's (:func:`wire_for`)."""

    log: EventLog
    next_session: Callable[[Session, McpRunError], Awaitable[Session]]
    wire: TaskWire | None = None  # None: the session's era's (wire_for)
    mode: TaskMode = "auto"
    on_input_required: InputHandler | None = None


def wire_for(session: Session) -> TaskWire:
    """How tasks are spoken on ``session``: the extension of 2026-07-28 on a session of that era, else the
    experimental tasks of 2025-11-25 (the extension must not be used on an older era)."""
    return TASKS_2026 if session.protocol_version == TASKS_2026.era else TASKS_2025


def offers_tasks(session: Session) -> bool:
    """Whether ``session``'s server offers tasks at all: when not, :func:`wants_task_now` is False, asked
    without a coroutine (every call of a server without tasks asks it)."""
    return wire_for(session).offered(session.capabilities)


async def wants_task_now(session: Session, tool: str, wire: TaskWire | None = None, mode: TaskMode = "auto") -> bool:
    """Whether to call ``tool`` as a task on ``session``. Lists tools only for a server that offers tasks (its
    tool list says each tool's ``taskSupport``); a listing that fails means no task."""
    wire = wire or wire_for(session)
    if not wire.offered(session.capabilities):
        return False
    tools = session.listed_tools
    if tools is None:
        try:
            tools = await session.list_tools()
        except McpRunError:
            return False
    support = next((t.task_support for t in tools if t.name == tool), "forbidden")
    return wire.wants(session.capabilities, support, mode)


class TaskCall:
    """One item's call as a task (see the module docstring). ``where``: (step, item key, index)."""

    def __init__(self, site: TaskSite, where: tuple[str, str, int | None], *, timeout: float | None) -> None:
        self._site = site
        self._step, self._key, self._index = where
        self._timeout = timeout
        self._deadline = math.inf
        self._shown: tuple[TaskStatus, str | None] | None = None
        self._asked: set[str] = set()  # the keys of the questions a 2026 task asked (each answered once)
        self.created: str | None = None  # the task's id once it is journaled (or collected): a resume's to collect

    async def start(
        self,
        session: Session,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        idle_timeout: float | None,
        on_progress: ProgressHandler | None,
        before_send: BeforeSend,
        on_resumed: Callable[[str], None] | None,
    ) -> ToolResult:
        """Steps 1 to 4 of the module docstring."""
        self._deadline = _deadline(self._timeout)
        tokens: list[Any] = []

        async def sent(rid: Any, token: Any) -> Gate | None:
            gate = await before_send(rid, token)
            tokens.append(token)
            return gate

        created = await self._wire(session).start(
            session,
            tool,
            arguments,
            TaskCallOptions(
                timeout=self._timeout,
                idle_timeout=idle_timeout,
                on_progress=on_progress,
                before_send=sent,
                on_resumed=on_resumed,
            ),
        )
        if isinstance(created, ToolResult):
            return created  # the server ran it at once
        task = created
        await self._site.log.commit(self._created(session.name, task))
        self.created = task.task_id
        if on_progress is not None and tokens:
            session.follow_progress(tokens[-1], on_progress)
        try:
            return await self._follow(session, task, first_poll=False)
        except (NotDelivered, ConnectFailed) as exc:
            # Never "not sent" once the task exists: the call would be made again while its task runs.
            raise TaskUncollected(f"{session.name}: task {task.task_id}: {first_line(exc)}") from exc
        finally:
            if tokens:
                session.follow_progress(tokens[-1], None)

    async def collect(self, session: Session, task_id: str) -> ToolResult:
        """The result of a task an earlier attempt journaled: polled at once, then as :meth:`start` does."""
        self._deadline = _deadline(self._timeout)
        self.created = task_id
        placeholder = Task(task_id=task_id, status=TaskStatus.WORKING)
        return await self._follow(session, placeholder, first_poll=True)

    async def _follow(self, session: Session, task: Task, *, first_poll: bool) -> ToolResult:
        # No except for trio.Cancelled: when the run is stopping (a second interrupt, or the grace period ran
        # out) the task goes on on the server, its id is journaled, and a resume collects its result. No
        # tasks/cancel: that would throw away work a resume can still have.
        expiry = _Expiry.of(task, own=not first_poll)
        asked_input = False
        if not first_poll:
            self._status(task)
        while first_poll or not task.status.terminal:
            if not first_poll and not await self._wait_to_poll(session, task, expiry.at):
                continue
            first_poll = False
            session, polled = await self._poll(session, task)
            if polled is None:
                continue
            expiry.renew(task, polled)
            task = polled
            self._status(task)
            asked_input = await self._on_input(session, task, asked_input)
        return await self._outcome(session, task)

    async def _wait_to_poll(self, session: Session, task: Task, expires: float) -> bool:
        """Sleep until the next poll is due. Raises when the timeout or the ttl ran out before this wait;
        False when one runs out during it (the loop checks again, and raises)."""
        now = trio.current_time()
        if now >= self._deadline:
            raise await self._timed_out(session, task)
        if now >= expires:
            raise TaskUnfinished(
                f"{session.name}: task {task.task_id} outlived its ttl of {task.ttl_ms} ms without "
                "finishing; the server may drop it: the tool may have run"
            )
        await trio.sleep_until(min(now + poll_delay(task), self._deadline, expires))
        return trio.current_time() < min(self._deadline, expires)

    async def _on_input(self, session: Session, task: Task, asked: bool) -> bool:
        """Answer what ``task`` asks, if it asks: a 2026 task's new questions here; a 2025 task's by
        ``on_input_required``, once per spell of ``input_required``. Returns whether this spell was handed to
        it (``asked``: whether it already was)."""
        if task.status is not TaskStatus.INPUT_REQUIRED:
            return False
        if self._answers_itself(session):
            await self._answer_2026(session, task)  # new questions only: each key is answered once
            return asked
        if not asked and self._site.on_input_required is not None:
            await self._site.on_input_required(session, task)
        return True

    async def _poll(self, session: Session, task: Task) -> tuple[Session, Task | None]:
        """One ``tasks/get``: the session it went out on (a new one if the old failed) and the task, or None
        when the connection failed (polled again on the next session)."""
        try:
            return session, await self._wire(session).get(session, task.task_id, timeout=POLL_TIMEOUT)
        except JsonRpcError as exc:
            if exc.code == TASK_NOT_FOUND:
                raise TaskLost(
                    f"{session.name}: the server no longer knows task {task.task_id} ({first_line(exc)}): the "
                    "task was lost (expired, or the server forgot it); the tool may have run"
                ) from exc
            raise OutcomeUnknown(f"{session.name}: tasks/get {task.task_id} failed: {first_line(exc)}") from exc
        except TransportError as exc:
            self._note(task.task_id, task.status.value, f"connection lost while polling: {first_line(exc)}")
            try:
                return await self._site.next_session(session, exc), None
            except McpRunError as gone:
                raise TaskUncollected(
                    f"{session.name}: task {task.task_id} could not be polled ({first_line(gone)}); "
                    "a resume collects its result"
                ) from gone

    async def _outcome(self, session: Session, task: Task) -> ToolResult:
        if task.status is TaskStatus.CANCELLED:
            said = f": {task.status_message}" if task.status_message else ""
            raise TaskUnfinished(
                f"{session.name}: task {task.task_id} was cancelled by the server{said}; the tool may have done "
                "part of its work"
            )
        try:
            return await self._wire(session).result(session, task, timeout=POLL_TIMEOUT)
        except JsonRpcError as exc:
            if task.error is not None:
                raise  # the error the task failed with (2026), whatever its code
            if exc.code == TASK_NOT_FOUND:
                raise TaskLost(
                    f"{session.name}: task {task.task_id} ended {task.status.value}, and its result is gone: "
                    f"{first_line(exc)}"
                ) from exc
            if task.status is TaskStatus.FAILED:
                raise  # the server's answer: the task failed, and says how
            raise OutcomeUnknown(f"{session.name}: tasks/result {task.task_id} failed: {first_line(exc)}") from exc
        except (TransportError, MalformedMessage) as exc:
            raise OutcomeUnknown(
                f"{session.name}: task {task.task_id} {task.status.value}, but its result could not be read: "
                f"{first_line(exc)}"
            ) from exc

    async def _timed_out(self, session: Session, task: Task) -> CallTimeout:
        why = await self._wire(session).cancel(session, task.task_id)
        sent = "tasks/cancel sent" if why is None else f"tasks/cancel failed: {why}"
        return CallTimeout(f"{session.name}: task {task.task_id} got no result ({self._timeout:g} s timeout); {sent}")

    def _wire(self, session: Session) -> TaskWire:
        return self._site.wire or wire_for(session)

    def _answers_itself(self, session: Session) -> bool:
        """A 2026-07-28 task's questions are answered here, by the session's answer policy (``tasks/update``)."""
        return self._site.on_input_required is None and self._wire(session) is TASKS_2026

    async def _answer_2026(self, session: Session, task: Task) -> None:
        """Answer the questions ``task`` asks that were not answered yet, by the session's answer policy (as a
        2026 ``input_required`` result is: :mod:`runner.session.input_required`), with ``tasks/update``. A
        question the policy refuses (sampling) cancels the task and fails the item with the reason."""
        questions = new_input_requests(task, self._asked)
        if not questions:
            return
        try:
            answers = answer_input_requests({"inputRequests": questions}, session.options.answers, session.note_answer)
        except McpRunError as exc:
            await self._wire(session).cancel(session, task.task_id)
            raise TaskUnfinished(
                f"{session.name}: task {task.task_id} asked for input mcp-run cannot give ({first_line(exc)}); "
                "tasks/cancel sent (the tool may have done part of its work)"
            ) from exc
        try:
            await session.request("tasks/update", update_params(task.task_id, answers), timeout=POLL_TIMEOUT)
        except TransportError:
            self._asked.difference_update(questions)  # asked again on the next poll, on the next session
        except JsonRpcError as exc:
            raise TaskUnfinished(f"{session.name}: tasks/update {task.task_id} failed: {first_line(exc)}") from exc

    def _status(self, task: Task) -> None:
        """Journal and show a change of status or message."""
        message = task.status_message
        waiting = self._site.on_input_required is None and task.input_requests is None  # nobody answers it
        if task.status is TaskStatus.INPUT_REQUIRED and waiting:
            message = f"{message} ({INPUT_WAITING})" if message else INPUT_WAITING
        shown = (task.status, message)
        if shown != self._shown:
            self._shown = shown
            self._note(task.task_id, task.status.value, message)

    def _created(self, server: str, task: Task) -> TaskCreated:
        """The record a resume collects the task by: where it belongs, its id, and the server's terms."""
        return TaskCreated(step=self._step, item=self._key, index=self._index, server=server, **_terms(task))

    def _note(self, task_id: str, status: str, message: str | None) -> None:
        self._site.log.record(
            TaskUpdated(step=self._step, item=self._key, task_id=task_id, status=status, message=message)
        )


class _Terms(TypedDict):
    task_id: str
    created_at: str | None
    ttl: int | None
    poll_interval: int | None


def _terms(task: Task) -> _Terms:
    """A task as ``task_created`` records it (its ``ttl`` and ``poll_interval`` in milliseconds, the server's)."""
    return {
        "task_id": task.task_id,
        "created_at": task.created_at,
        "ttl": task.ttl_ms,
        "poll_interval": task.poll_interval_ms,
    }


@dataclass(slots=True)
class _Expiry:
    """When a task outlives its ttl, on trio's clock. The ttl counts from the task's creation: known here only
    for a task created by this attempt (``own``). A task collected on resume is the server's to expire (it then
    answers "not found")."""

    started: float
    own: bool
    at: float

    @classmethod
    def of(cls, task: Task, *, own: bool) -> _Expiry:
        started = trio.current_time()
        return cls(started, own, started + task.ttl_ms / 1000 if task.ttl_ms is not None else math.inf)

    def renew(self, old: Task, new: Task) -> None:
        """A poll of an own task that says another ttl moves the expiry (still counted from the start)."""
        if self.own and new.ttl_ms is not None and new.ttl_ms != old.ttl_ms:
            self.at = self.started + new.ttl_ms / 1000


def _deadline(timeout: float | None) -> float:
    return trio.current_time() + timeout if timeout is not None else math.inf
