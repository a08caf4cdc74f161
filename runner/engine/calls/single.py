"""One tool call outside a run (``mcp-run call``), by the rules an item's call follows in a run.

:func:`call_once` is a workflow step of one item without a journal. It reuses the item path's pieces, not
copies of them:

- the check before sending (:class:`~runner.engine.calls.tools.ToolChecks`, as every item's call and
  ``plan --check`` use it): an unknown tool, with the closest names suggested, or arguments the tool's
  ``inputSchema`` refuses raise :class:`~runner.errors.InvalidCall`, and nothing is sent; an argument the
  schema lets through without naming it is warned about, as ``plan --check`` notes it
  (:func:`~runner.workflow.argcheck.unlisted_arguments`: ``did you mean 'timezone'?``);
- the task rule (:func:`~runner.engine.calls.task.wants_task_now`): when the server offers tasks and the tool
  needs or allows one (``execution.taskSupport``), the call is made as a task and polled to its end by
  :class:`~runner.engine.calls.task.TaskCall`, whose status changes reach ``on_task`` (the ``task_status``
  records a run journals); otherwise a plain ``tools/call``.

What differs from a run is what a run has and this has not: no journal (a task's id is not kept, so a task that
cannot be polled to its end cannot be collected later: in doubt, :class:`TaskNotCollected`), no reconnection
(the session is the only one), no retries (the call is made once, as ``call`` always made it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from runner.engine.calls.retry import failure_kind
from runner.engine.calls.task import TaskCall, TaskSite, TaskUncollected, wants_task_now
from runner.engine.calls.tools import ToolChecks
from runner.engine.core.events import Entry, TaskUpdated
from runner.engine.journal.writer import EventLog
from runner.errors import McpRunError, NotDelivered, OutcomeUnknown, ServerError, first_line
from runner.exitcodes import ExitCode
from runner.protocol.jsonrpc import RequestId
from runner.protocol.mcp import ToolResult
from runner.protocol.tasks import TaskMode
from runner.session import ProgressHandler, Session
from runner.workflow.argcheck import unlisted_arguments

__all__ = ["CallOptions", "TaskNotCollected", "call_once", "exit_code_of"]

POLL_FAILURES: Final = 3
"""Polls of a task in a row that may fail on a connection that still stands before the call gives up on it."""


class TaskNotCollected(OutcomeUnknown):
    """The server took the call as a task, and its result could not be collected (the connection went, or
    the call is being interrupted): the task may still run, and nothing keeps its id to collect it later."""


@dataclass(frozen=True, slots=True)
class CallOptions:
    """How :func:`call_once` makes its call: the step's ``timeout`` and ``idle_timeout``, the server's
    ``tasks:``, and who hears progress, task status changes (``task_status`` records, as a run journals them)
    and warnings (a tool list that cannot be read, a schema that cannot be used: the call goes out unchecked)."""

    timeout: float | None = None
    idle_timeout: float | None = None
    tasks: TaskMode = "auto"
    on_progress: ProgressHandler | None = None
    on_task: Callable[[TaskUpdated], None] | None = None
    on_warning: Callable[[str], None] | None = None


async def call_once(
    session: Session, server: str, tool: str, arguments: Mapping[str, Any], options: CallOptions
) -> ToolResult:
    """Call ``tool`` once on ``session`` (see the module docstring); ``server`` names the server in messages.
    Raises ``InvalidCall`` before sending anything, else what the call raises (``TaskNotCollected`` for a
    task whose result could not be collected)."""
    checks = ToolChecks(on_warning=options.on_warning)
    await checks.check(server, session, tool, arguments)
    listed = checks.known(session, tool)
    if listed is not None and options.on_warning is not None:
        for text in unlisted_arguments(tool, listed.input_schema, arguments):  # as plan --check notes them
            options.on_warning(f"{server}: {text}")
    if not await wants_task_now(session, tool, mode=options.tasks):
        return await session.call_tool(
            tool,
            arguments,
            timeout=options.timeout,
            idle_timeout=options.idle_timeout,
            on_progress=options.on_progress,
        )
    log = EventLog(None)  # no journal: its records only reach on_task
    if options.on_task is not None:
        log.subscribe(_task_updates(options.on_task))
    failures = 0

    async def next_session(old: Session, error: McpRunError) -> Session:
        # No other session to wait for: polling goes on on this one while it stands (a poll that failed on a
        # connection that is still up, as an HTTP request may), a few times in a row.
        nonlocal failures
        failures += 1
        if isinstance(error, NotDelivered) or old.broken is not None or failures > POLL_FAILURES:
            raise error
        return old

    async def sent(rid: RequestId, token: RequestId) -> None:
        return None

    call = TaskCall(
        TaskSite(log=log, next_session=next_session, mode=options.tasks), ("call", "", None), timeout=options.timeout
    )
    try:
        return await call.start(
            session,
            tool,
            arguments,
            idle_timeout=options.idle_timeout,
            on_progress=options.on_progress,
            before_send=sent,
            on_resumed=None,
        )
    except TaskUncollected as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, McpRunError) else exc
        raise TaskNotCollected(
            f"{session.name}: task {call.created} may still be running on the server, and its result could not be "
            f"collected ({first_line(cause)}); nothing keeps its id to collect it later"
        ) from exc


def _task_updates(on_task: Callable[[TaskUpdated], None]) -> Callable[[Entry], None]:
    def observe(entry: Entry) -> None:
        if isinstance(entry.event, TaskUpdated):
            on_task(entry.event)

    return observe


def exit_code_of(exc: ServerError) -> ExitCode:
    """The exit code of a run whose one item's call failed with ``exc``: its failure kind's
    (:func:`~runner.engine.calls.retry.failure_kind`). So a 4xx to the call is the server's refusal (3), as in
    a run, not an unreachable server."""
    return failure_kind(exc).exit_code
