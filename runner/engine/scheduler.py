"""The trio engine that runs a plan: steps as their dependencies finish, fan-outs through bounded worker
pools, one shared session per server, every state change journaled.

The scheduler does not know transports: it is handed an ``opener`` that turns a server name (and the
session options the scheduler wants, with its log routing) into an open session. It emits typed events
(:mod:`runner.engine.core.events`) to an :class:`~runner.engine.journal.writer.EventLog`, which applies each to
the run's live :class:`~runner.engine.core.state.RunState`; the scheduler reads that state for its decisions and settles
the outcome from it (:func:`runner.engine.core.outcome.settle`), so what it decides, what the views show and what
the summary says are one fold.

Rules it keeps (the README states them for users):

- A step runs when every dependency succeeded (a ``continue_on_error`` step counts as succeeded); ``if``
  false skips it; a failed or skipped dependency skips it, unless its ``if`` calls a status function
  (``always()``, ``failure()``, ...): then that decides (:mod:`runner.engine.core.conditions`).
- A failed fan-out item does not stop its siblings; the step fails at the end if any item failed. Once a
  step has failed (without ``continue_on_error``), no new step starts (but those whose ``if`` says
  otherwise, like ``always()``); fan-outs already running go on.
  Calls already dispatched are never cancelled because something else failed.
- Concurrency is bounded globally, per server (``max_concurrency``) and per step (``concurrency``); a
  fan-out of 100,000 items runs through that many workers, not 100,000 tasks, and keeps results in memory
  only when some template or output reads them.
- Each call is checked against its server's tool list before it is sent (:mod:`runner.engine.calls.tools`);
  its dispatch is journaled durably *before* the request is written; its result after it arrives
  (:mod:`runner.engine.calls.item`). A server that goes away is reconnected by its link
  (:mod:`runner.engine.servers`) while its calls wait.
- ``drain()`` (first interrupt) stops dispatching; ``cancel()`` (second, or after the grace period)
  cancels calls in flight, which send ``notifications/cancelled`` and are journaled as cancelled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Final

import trio

from runner.backoff import Backoff
from runner.engine.calls.args import ArgsRenderer, args_renderer
from runner.engine.calls.item import CallSite, Drained, ItemCall
from runner.engine.calls.retry import RetryPolicy, failure_kind, is_safe_to_repeat
from runner.engine.calls.tools import ToolChecks
from runner.engine.core.conditions import Gate, Skip
from runner.engine.core.events import (
    Decision,
    DoubtDecided,
    FailureKind,
    ItemFailed,
    ItemStatus,
    ItemSucceeded,
    SessionFailed,
    SessionLost,
    SessionOpened,
    SessionRetrying,
    StepFinished,
    StepSkipped,
    StepStarted,
    StepStatus,
)
from runner.engine.core.outcome import Outcome, settle
from runner.engine.core.readiness import Readiness
from runner.engine.core.resume import Prior
from runner.engine.core.state import SKIPPED_IN_DOUBT, ItemState, RunState, StepState
from runner.engine.core.steps import Fail, decide_step
from runner.engine.journal.notes import LOG_LIMIT, LOG_RATE, PROGRESS_INTERVAL, Notes
from runner.engine.journal.writer import EventLog, JournalWriteError
from runner.engine.servers import (
    LinkEvent,
    LinkFailed,
    LinkLost,
    LinkOpened,
    LinkPolicy,
    LinkRetrying,
    ServerLink,
    answer_policy,
)
from runner.errors import CallTimeout, MalformedMessage, McpRunError, first_line
from runner.protocol.mcp import LogMessage as McpLogMessage
from runner.session import Session, SessionOptions
from runner.workflow.context import fanout_view, identified, item_entry, make_context, step_view
from runner.workflow.plan import DEFAULT_CONNECT_TIMEOUT, DEFAULT_RECONNECT, OutputFailure, Plan, PlannedStep
from runner.workflow.template import TemplateError

__all__ = ["Outcome", "Scheduler", "SchedulerOptions", "SessionOpener"]

SessionOpener = Callable[[str, SessionOptions], AbstractAsyncContextManager[Session]]

IDLE_HINT: Final = " (a slow tool without progress notifications needs a longer idle_timeout, or none)"


@dataclass(frozen=True)
class SchedulerOptions:
    """``retry`` bounds calling again a tool that is safe to repeat after its outcome was unknown;
    ``connect_timeout`` is the default for servers that set none; ``backoff`` paces every wait;
    ``progress_interval`` and ``log_limit`` bound the notifications journaled per item
    (:mod:`runner.engine.journal.notes`)."""

    concurrency: int = 16
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    server_log_level: str | None = "info"
    elicitation: str | None = None
    protocol: str | None = None  # pins every server's protocol revision; None: each server's own protocol:
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    backoff: Backoff = field(default_factory=Backoff)
    progress_interval: float = PROGRESS_INTERVAL  # an item journals one progress record per interval at most
    log_limit: int | None = LOG_LIMIT  # log messages journaled per item (None: all); see runner.engine.journal.notes
    log_rate: float = LOG_RATE  # ... per second and server past a burst of log_limit, for those of no call


class Scheduler:
    """Runs ``plan``. ``state`` is the run's live state: for a resume, its journal folded (the events of
    this attempt are applied on top); ``log`` must apply every event it emits to that same state (the run
    subscribes ``state.apply`` first)."""

    def __init__(
        self,
        plan: Plan,
        *,
        inputs: Mapping[str, Any],
        env: Mapping[str, Any],
        opener: SessionOpener,
        log: EventLog,
        state: RunState,
        options: SchedulerOptions | None = None,
        prior: Prior | None = None,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self._plan = plan
        self._inputs = inputs
        self._env = env
        self._opener = opener
        self._log = log
        self._state = state
        self._options = options or SchedulerOptions()
        self._prior = prior
        self._on_warning = on_warning
        self._views: dict[str, Any] = {}  # steps.<id> for templates: only while some step left to run reads it
        self._readiness = Readiness(plan)
        self._steps_nursery: trio.Nursery | None = None
        self._stop_new: str | None = None
        self._gate = Gate(plan, state)
        self._draining = False
        self._work_scope: trio.CancelScope | None = None
        self._links: dict[str, ServerLink] = {}
        self._sessions: dict[str, dict[int, Session]] = {}  # every session each server had, for its stats
        self._tools = ToolChecks(on_warning=on_warning)  # each session's tools, and the check of each call
        self._waiting: set[trio.CancelScope] = set()  # waits for a server: a drain stops them
        self._sessions_nursery: trio.Nursery | None = None
        self._in_flight: dict[tuple[str, Any], tuple[str, str]] = {}
        self._global = trio.Semaphore(self._options.concurrency)
        options = self._options
        self._notes = Notes(
            log, progress_interval=options.progress_interval, log_limit=options.log_limit, log_rate=options.log_rate
        )
        self._server_limits = {name: trio.Semaphore(ps.server.max_concurrency) for name, ps in plan.servers.items()}
        self._sites = {
            name: CallSite(
                log=log,
                notes=self._notes,
                retry=self._options.retry,
                backoff=self._options.backoff,
                wait_for=self._wait_for,
                limits=(self._global, limit),
                draining=lambda: self._draining,
                in_flight=self._in_flight,
                safe_to_repeat=self._safe_to_repeat,
                known_safe=self._known_safe,
                check=self._check_call,
                tasks=plan.servers[name].server.tasks,
            )
            for name, limit in self._server_limits.items()
        }

    # -- control -------------------------------------------------------------------------------------

    def drain(self) -> None:
        """Dispatch nothing new; let calls in flight finish."""
        self._draining = True
        for scope in self._waiting:
            scope.cancel()

    def cancel(self) -> None:
        """Cancel calls in flight now (they are journaled as cancelled: in doubt on resume)."""
        self._draining = True
        if self._work_scope is not None:
            self._work_scope.cancel()

    @property
    def interrupted(self) -> bool:
        return self._draining

    # -- the run ---------------------------------------------------------------------------------------

    async def run(self) -> Outcome:
        async with trio.open_nursery() as sessions:
            self._sessions_nursery = sessions
            self._notes.attach(sessions)
            try:
                with trio.CancelScope() as scope:
                    self._work_scope = scope
                    if await self._resolve_in_doubt():
                        return settle(self._plan, self._state, blocked=True)
                    async with trio.open_nursery() as steps:
                        # A step gets its task when its last dependency ends (see _step_task), not before:
                        # 20,000 steps waiting would be 20,000 tasks.
                        self._steps_nursery = steps
                        for sid in self._readiness.first():
                            steps.start_soon(self._step_task, sid)
            finally:
                self._notes.close()
                for link in self._links.values():
                    link.close()
        return self._finish()

    async def _resolve_in_doubt(self) -> bool:
        """Decide, before anything runs, what happens to items an earlier attempt left in doubt. True when
        some block the run (not safe to repeat, no decision given now, none still to carry out).

        A decision given now (``--rerun-in-doubt``, ``--skip-in-doubt``, ``--accept-in-doubt``) is journaled as
        one ``doubt_decided`` record per step naming the items it settles, and made durable before anything
        acts on it: a crash after it cannot lose it, and a later decision never reaches the items it settled
        (:meth:`runner.engine.core.state.RunState._doubt_decided`)."""
        prior = self._prior
        if prior is None:
            return False
        undecided: dict[str, list[str]] = {}
        for sid, item in self._state.in_doubt():
            if sid not in self._plan.steps or sid in prior.fresh_steps or item.collectable:
                continue  # (a collectable item's task is polled for its result: not in doubt)
            if item.decided is Decision.RERUN:
                continue  # decided by an earlier resume, journaled, not carried out yet: it is now
            try:
                safe = await self._safe_to_repeat(self._plan.steps[sid], connect=True)
            except (McpRunError, Drained):
                safe = False
            if not safe:
                undecided.setdefault(sid, []).append(item.key)
        if not undecided:
            return False
        if prior.in_doubt == "ask":
            return True
        chosen = Decision(prior.in_doubt)
        decisions = [DoubtDecided(step=sid, keys=keys, decision=chosen) for sid, keys in undecided.items()]
        for decision in decisions[:-1]:
            self._log.append(decision)
        await self._log.commit(decisions[-1])  # durable, with those before it, before any call is made
        return False

    def _finish(self) -> Outcome:
        outputs: dict[str, Any] = {}
        output_failures: tuple[OutputFailure, ...] = ()
        if not self._draining:  # (the outcome reports an output that fails: the summary names it)
            outputs, output_failures = self._plan.render_each_output(self._context())
        return settle(
            self._plan,
            self._state,
            interrupted=self._draining,
            outputs=outputs,
            output_failures=output_failures,
            stray=self._stray(),
        )

    def _stray(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for server, sessions in self._sessions.items():
            invalid = sum(session.stats.invalid_lines for session in sessions.values())
            unmatched = sum(session.stats.unmatched_responses for session in sessions.values())
            if invalid or unmatched:
                out[server] = {"invalid_lines": invalid, "unmatched_responses": unmatched}
        return out

    def _context(self, item: Any = None, index: int | None = None) -> dict[str, Any]:
        return make_context(inputs=self._inputs, env=self._env, steps=self._views, item=item, index=index)

    def _warn(self, text: str) -> None:
        if self._on_warning is not None:
            self._on_warning(text)

    # -- steps -----------------------------------------------------------------------------------------

    async def _step_task(self, sid: str) -> None:
        ps = self._plan.steps[sid]
        try:
            # A task started into a cancelled nursery still runs until its first checkpoint: start nothing then.
            await trio.lowlevel.checkpoint()
            decision = decide_step(self._gate, ps, self._context, draining=self._draining, stopped_by=self._stop_new)
            if isinstance(decision, Skip):
                self._skip(ps, decision)
            elif isinstance(decision, Fail):
                self._fail_step(ps, decision.error, decision.kind)
            else:
                await self._run_step(ps)
        finally:
            self._ended(sid)

    def _ended(self, sid: str) -> None:
        """Start the steps whose last dependency ``sid`` was; drop the views no step left to run reads."""
        ready, unread = self._readiness.ended(sid)
        for name in unread:
            self._views.pop(name, None)
        assert self._steps_nursery is not None
        for dependent in ready:
            self._steps_nursery.start_soon(self._step_task, dependent)

    def _skip(self, ps: PlannedStep, skip: Skip) -> None:
        self._views[ps.id] = fanout_view([], [], "skipped") if ps.fan_out else step_view(None, status="skipped")
        self._log.record(StepSkipped(step=ps.id, reason=skip.reason, cause=skip.cause))

    def _fail_step(self, ps: PlannedStep, error: str, kind: FailureKind) -> None:
        # A server that could not be reached leaves the step undone, not failed: a resume runs it.
        status = StepStatus.INCOMPLETE if kind is FailureKind.NOT_SENT else StepStatus.FAILED
        self._views[ps.id] = step_view(None, status="failed") if not ps.fan_out else fanout_view([], [], "failed")
        if status is StepStatus.FAILED and not ps.continue_on_error:
            self._stop_new = self._stop_new or ps.id
        counts = self._state.step(ps.id).counts(live=False).as_dict()
        self._log.record(StepFinished(step=ps.id, status=status, counts=counts, error=error, kind=kind))

    async def _run_step(self, ps: PlannedStep) -> None:
        if ps.fan_out:
            try:
                items = ps.render_items(self._context())
                keys = self._keys(ps, items)
            except TemplateError as exc:
                self._fail_step(ps, str(exc), FailureKind.TEMPLATE_ERROR)
                return
        else:
            items, keys = [None], [""]
        fresh = self._prior is not None and ps.id in self._prior.fresh_steps
        reused = 0 if fresh else sum(1 for key in keys if self._reused(ps.id, key))
        self._log.record(
            StepStarted(
                step=ps.id, items=len(items) if ps.fan_out else None, reused=reused or None, fresh=fresh or None
            )
        )
        if reused < len(items):
            try:
                await self._wait_for(self._link(ps.server))
            except Drained:
                self._finish_step(ps, StepStatus.INTERRUPTED)
                return
            except McpRunError as exc:
                self._fail_step(ps, first_line(exc), failure_kind(exc))
                return
        keep = ps.referenced
        render = args_renderer(ps, self._context)
        results: list[Any] = [None] * len(items) if keep else []
        single: dict[str, Any] | None = None
        positions = iter(range(len(items)))
        workers = min(len(items), ps.concurrency or self._plan.servers[ps.server].server.max_concurrency)

        async def worker() -> None:
            nonlocal single
            for index in positions:
                if self._draining:
                    return
                entry = await self._item(ps, index if ps.fan_out else None, items[index], keys[index], render)
                if keep:
                    if ps.fan_out:
                        results[index] = identified(entry, items[index], keys[index], index)
                    else:
                        single = entry

        async with trio.open_nursery() as pool:
            for _ in range(max(workers, 1)):
                pool.start_soon(worker)
        status = self._step_outcome(self._state.step(ps.id), keys)
        if ps.fan_out:
            self._views[ps.id] = fanout_view(items if keep else [], results, _view_status(status))
        else:
            view = single or step_view(None, status=_view_status(status))
            view.pop("error", None)
            self._views[ps.id] = view
        if status is StepStatus.FAILED and not ps.continue_on_error:
            self._stop_new = self._stop_new or ps.id
        self._finish_step(ps, status)

    def _step_outcome(self, step: StepState, keys: list[str]) -> StepStatus:
        """How a step that ran ended, from its items in this attempt."""
        mine = [step.items[key] for key in keys if key in step.items]
        undone = len(keys) - len(mine) + sum(1 for item in mine if item.status is ItemStatus.DISPATCHED)
        if self._draining and undone:
            return StepStatus.INTERRUPTED
        failed = [item for item in mine if item.status in (ItemStatus.FAILED, ItemStatus.SKIPPED)]
        doubt = any(item.in_doubt for item in mine)
        if failed and not doubt and all(item.kind is FailureKind.NOT_SENT for item in failed):
            return StepStatus.INCOMPLETE
        return StepStatus.FAILED if failed or doubt else StepStatus.SUCCEEDED

    def _finish_step(self, ps: PlannedStep, status: StepStatus) -> None:
        counts = self._state.step(ps.id).counts(live=False).as_dict()
        self._log.record(StepFinished(step=ps.id, status=status, counts=counts))

    def _keys(self, ps: PlannedStep, items: list[Any]) -> list[str]:
        keys: list[str] = []
        seen: dict[str, int] = {}
        full_hash = self._state.journal_format < 2
        masker = self._log.masker if self._log.masker else None  # no secrets: nothing to look for
        for index, item in enumerate(items):
            key = ps.render_key(self._context(item, index), full_hash=full_hash)
            held = masker.secrets_in(key) if masker is not None else []
            if held:
                # A key is an item's identity in the journal, written as it is: masked, it would no longer
                # match its item once the secret changes, and a resume would call that item again.
                secrets = ", ".join(held)
                raise TemplateError(
                    f"the key of item {index} of step {ps.id!r} holds the value of {secrets}; keys are "
                    "journaled as they are, never masked: give the step a `key` without secrets"
                )
            first = seen.setdefault(key, index)
            if first != index:
                raise TemplateError(ps.same_key(first, index, key))
            keys.append(key)
        return keys

    # -- items -----------------------------------------------------------------------------------------

    def _prior_item(self, sid: str, key: str) -> ItemState | None:
        """What earlier attempts left of an item (None for a changed step: its history is ignored)."""
        if self._prior is None or sid in self._prior.fresh_steps:
            return None
        return self._state.item(sid, key)

    def _reused(self, sid: str, key: str) -> bool:
        prior = self._prior_item(sid, key)
        return prior is not None and prior.status is ItemStatus.SUCCEEDED

    async def _item(
        self,
        ps: PlannedStep,
        index: int | None,
        item: Any,
        key: str,
        render: ArgsRenderer,
    ) -> dict[str, Any] | None:
        prior = self._prior_item(ps.id, key)
        if prior is not None:
            if prior.status is ItemStatus.SUCCEEDED:
                return item_entry("succeeded", None, prior.result)
            if prior.status is ItemStatus.SKIPPED:
                # Skipped in doubt (by this resume, or an earlier one): settled, never called again.
                return item_entry("failed", prior.error or SKIPPED_IN_DOUBT)
        try:
            args = render(item, index)
        except TemplateError as exc:
            return item_entry("failed", self._item_failed(ps, index, key, FailureKind.TEMPLATE_ERROR, str(exc)))
        if not isinstance(args, dict):
            error = f"args rendered to {type(args).__name__}, expected an object"
            return item_entry("failed", self._item_failed(ps, index, key, FailureKind.TEMPLATE_ERROR, error))
        try:
            # An item in doubt re-run by decision may have run already: a refusal by the check would record
            # "not sent" and lose that; it goes out unchecked, as a retry does.
            maybe_ran = prior is not None and prior.in_doubt
            call = ItemCall(self._sites[ps.server], self._link(ps.server), ps, index, key, args, sent_before=maybe_ran)
            task_id = prior.task_id if prior is not None and prior.collectable else None
            # A task an earlier attempt started is collected, not called again (runner.engine.calls.task).
            result = await (call.collect(task_id) if task_id is not None else call.run())
        except Drained:
            return None
        except JournalWriteError:
            raise  # nothing may be dispatched unrecorded: the run stops
        except McpRunError as exc:
            # A reply that could not be read is a lost result: the server may have done the work.
            kind = FailureKind.OUTCOME_UNKNOWN if isinstance(exc, MalformedMessage) else failure_kind(exc)
            self._log.masker.scrub(exc)  # a server's stderr tail is masked raw, before str() indents it
            error = str(exc) + (IDLE_HINT if isinstance(exc, CallTimeout) and exc.idle else "")
            return item_entry("failed", self._item_failed(ps, index, key, kind, error))
        if result.is_error:
            text = result.text or "tool reported an error"
            self._item_failed(ps, index, key, FailureKind.TOOL_ERROR, text, result.raw)
            return item_entry("failed", text, result.raw)
        self._notes.settle(ps.id, key)  # the item's last progress and its log count, before its result
        self._log.record(ItemSucceeded(step=ps.id, item=key, index=index, result=result.raw))
        # The entry (its text parsed as JSON, among others) is made only for a step whose results are kept.
        return item_entry("succeeded", None, result.raw) if ps.referenced else None

    def _item_failed(
        self,
        ps: PlannedStep,
        index: int | None,
        key: str,
        kind: FailureKind,
        error: str,
        result: dict[str, Any] | None = None,
    ) -> str:
        self._notes.settle(ps.id, key)
        self._log.record(ItemFailed(step=ps.id, item=key, index=index, kind=kind, error=error, result=result))
        return error

    async def _safe_to_repeat(self, ps: PlannedStep, *, connect: bool = False) -> bool:
        if ps.idempotent:
            return True
        if not self._plan.servers[ps.server].server.trust_annotations:
            return False
        link = self._link(ps.server)
        session = await self._wait_for(link) if connect else link.current()
        tool = await self._tools.tool(ps.server, session, ps.tool) if session is not None else None
        if tool is None:
            return False
        return is_safe_to_repeat(
            idempotent_step=False,
            trusted=True,
            read_only=tool.annotations.read_only,
            idempotent_tool=tool.annotations.idempotent,
        )

    def _known_safe(self, ps: PlannedStep, session: Session) -> bool:
        """Safe to repeat by what is known now, asking nothing (the step says so, or the server is trusted and
        the tool list ``session`` already has annotates the tool so): a call safe to repeat need not wait for
        its dispatch record to be fsynced. Not known is not safe."""
        if ps.idempotent:
            return True
        if not self._plan.servers[ps.server].server.trust_annotations:
            return False
        tool = self._tools.known(session, ps.tool)
        return tool is not None and is_safe_to_repeat(
            idempotent_step=False,
            trusted=True,
            read_only=tool.annotations.read_only,
            idempotent_tool=tool.annotations.idempotent,
        )

    async def _check_call(self, ps: PlannedStep, args: dict[str, Any], session: Session) -> None:
        await self._tools.check(ps.server, session, ps.tool, args)

    # -- sessions --------------------------------------------------------------------------------------

    async def _wait_for(self, link: ServerLink) -> Session:
        """The link's session, waiting while its server is being (re)connected; ``Drained`` when an
        interrupt comes first (the run dispatches nothing new)."""
        if self._draining:
            raise Drained("the run is being interrupted; not dispatching")
        session = link.current()
        if session is not None:
            return session  # up: what link.session() returns at once (every call but the first comes here)
        with trio.CancelScope() as scope:
            self._waiting.add(scope)
            try:
                return await link.session()
            finally:
                self._waiting.discard(scope)
        raise Drained("the run is being interrupted; not dispatching")

    def _link(self, name: str) -> ServerLink:
        """The server's link, started on first use (see :mod:`runner.engine.servers`)."""
        link = self._links.get(name)
        if link is not None:
            return link
        ps = self._plan.servers[name]
        server = ps.server
        policy = LinkPolicy(
            connect_timeout=server.connect_timeout or self._options.connect_timeout,
            reconnect=server.reconnect if server.reconnect is not None else DEFAULT_RECONNECT,
            retry_first=ps.transport == "http",
            backoff=self._options.backoff,
        )
        options = SessionOptions(
            name=name,
            server_log_level=self._options.server_log_level,
            initialize_timeout=policy.connect_timeout,
            protocol=self._options.protocol or server.protocol,
            on_log=lambda message, rid: self._on_log(name, message, rid),
            on_warning=self._warn,
            answers=answer_policy(self._plan, name, self._options.elicitation),
            tasks_extension=server.tasks != "off",
        )
        link = self._links[name] = ServerLink(
            name, lambda: self._opener(name, options), policy, on_event=self._on_link_event
        )
        assert self._sessions_nursery is not None
        link.start(self._sessions_nursery)
        return link

    def _on_link_event(self, event: LinkEvent) -> None:
        if isinstance(event, LinkOpened):
            session = event.session
            self._sessions.setdefault(event.server, {})[id(session)] = session
            self._log.record(
                SessionOpened(
                    server=event.server,
                    protocol_version=session.protocol_version,
                    server_info=session.server_info,
                    reconnects=event.reconnects or None,
                    down_s=round(event.down_for or 0.0, 3) if event.reconnects else None,
                )
            )
        elif isinstance(event, LinkLost):
            self._log.record(SessionLost(server=event.server, error=first_line(event.error)))
        elif isinstance(event, LinkRetrying):
            self._log.record(
                SessionRetrying(
                    server=event.server,
                    attempt=event.attempt,
                    delay_s=round(event.delay, 3),
                    remaining_s=round(event.remaining, 3),
                    error=first_line(event.error),
                )
            )
        elif isinstance(event, LinkFailed):
            self._log.record(SessionFailed(server=event.server, kind=failure_kind(event.error), error=str(event.error)))

    def _on_log(self, server: str, message: McpLogMessage, rid: Any) -> None:
        where = self._in_flight.get((server, rid)) if rid is not None else None
        self._notes.log(server, where, message)


def _view_status(status: StepStatus) -> Any:
    return status.value if status.value in ("succeeded", "failed", "skipped") else "failed"
