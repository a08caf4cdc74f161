"""The trio engine that runs a plan: steps as their dependencies finish, fan-outs through bounded worker
pools, one shared session per server, every state change journaled.

The scheduler does not know transports: it is handed an ``opener`` that turns a server name (and the
session options the scheduler wants, with its log routing) into an open session. It emits typed events
(:mod:`runner.engine.core.events`) to an :class:`~runner.engine.journal.writer.EventLog`, which applies each to
the run's live :class:`~runner.engine.core.state.RunState`; the scheduler reads that state for its decisions and settles
the outcome from it (:func:`runner.engine.core.outcome.settle`), so what it decides, what the views show and what
the summary says are one fold.

Rules it keeps (docs/running.md states them for users):

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
  (:mod:`runner.engine.calls.servers`) while its calls wait.
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
from runner.engine.calls.retry import RetryPolicy, failure_kind, is_safe_to_repeat, reads_annotations
from runner.engine.calls.servers import (
    LinkEvent,
    LinkFailed,
    LinkLost,
    LinkOpened,
    LinkPolicy,
    LinkRetrying,
    LinkThrottled,
    ServerLink,
    answer_policy,
    has_unsafe_calls,
    throttled_event,
    until_delivered,
)
from runner.engine.calls.tools import ToolChecks
from runner.engine.core.cache import CacheIndex
from runner.engine.core.conditions import Skip
from runner.engine.core.events import (
    DoubtDecided,
    ItemFailed,
    ItemSucceeded,
    SessionFailed,
    SessionLost,
    SessionOpened,
    SessionRetrying,
)
from runner.engine.core.items import (
    ArgsFailed,
    ItemAction,
    awaiting_decision,
    rendered_args,
    settled_entry,
)
from runner.engine.core.outcome import Outcome, settle
from runner.engine.core.reconcile import left_in_doubt, reconcile_args, reconcile_context, verdict, verdict_entry
from runner.engine.core.resume import Prior
from runner.engine.core.state import ItemState, RunState
from runner.engine.core.steps import Fail, StepMachine
from runner.engine.core.vocabulary import Decision, FailureKind, StepStatus
from runner.engine.journal.notes import LOG_LIMIT, LOG_RATE, PROGRESS_INTERVAL, Notes
from runner.engine.journal.writer import EventLog, JournalWriteError
from runner.errors import CallTimeout, MalformedMessage, McpRunError, first_line
from runner.protocol.mcp import LogMessage as McpLogMessage
from runner.protocol.mcp import ToolResult
from runner.session import Session, SessionOptions
from runner.session.options import RequestTracer
from runner.workflow.context import item_entry
from runner.workflow.plan import DEFAULT_CONNECT_TIMEOUT, OutputFailure, Plan, PlannedReconcile, PlannedStep
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
    tracer: RequestTracer | None = None  # each session's requests traced (runner.engine.telemetry); None: not


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
        cache: CacheIndex | None = None,
    ) -> None:
        self._plan = plan
        self._opener = opener
        self._log = log
        self._state = state
        self._options = options or SchedulerOptions()
        self._prior = prior
        self._on_warning = on_warning
        # The views templates read, the step gate, and each step's start and end (shared with Temporal).
        self._steps = StepMachine(
            plan,
            state,
            log.record,
            inputs=inputs,
            env=env,
            resumed=prior is not None,
            fresh=frozenset(prior.fresh_steps) if prior is not None else frozenset(),
            cache=cache,
        )
        self._steps_nursery: trio.Nursery | None = None
        self._draining = False
        self._asked: dict[str, set[str]] = {}  # items of a step asked by its reconcile tool before being called
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
                        for sid in self._steps.first():
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
        for sid, keys in awaiting_decision(self._state, self._plan.steps, prior.fresh_steps).items():
            if prior.in_doubt == "ask" and self._plan.steps[sid].reconcile is not None:
                continue  # its reconcile tool settles them, each before it would be called (a decision still wins)
            try:
                safe = await self._safe_to_repeat(self._plan.steps[sid], connect=True)
            except (McpRunError, Drained):
                safe = False
            if not safe:
                undecided[sid] = keys
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
            outputs, output_failures = self._plan.render_each_output(self._steps.context())
        return settle(
            self._plan,
            self._state,
            interrupted=self._draining,
            outputs=outputs,
            output_failures=output_failures,
            stray=self._stray(),
            throttled=self._throttled(),
        )

    def _stray(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for server, sessions in self._sessions.items():
            invalid = sum(session.stats.invalid_lines for session in sessions.values())
            unmatched = sum(session.stats.unmatched_responses for session in sessions.values())
            if invalid or unmatched:
                out[server] = {"invalid_lines": invalid, "unmatched_responses": unmatched}
        return out

    def _throttled(self) -> dict[str, dict[str, float]]:
        """Per server that refused calls for now: answers of 429/503, pauses, seconds paused, and the calls it
        ran at once at the end (its adaptive limit)."""
        out: dict[str, dict[str, float]] = {}
        for name, link in self._links.items():
            pace = link.pace
            if pace.throttles:
                out[name] = {
                    "refused": pace.throttles,
                    "pauses": pace.pauses,
                    "paused_s": round(pace.paused_s, 3),
                    "concurrency": pace.limit,
                }
        return out

    def _warn(self, text: str) -> None:
        if self._on_warning is not None:
            self._on_warning(text)

    # -- steps -----------------------------------------------------------------------------------------

    async def _step_task(self, sid: str) -> None:
        ps = self._plan.steps[sid]
        try:
            # A task started into a cancelled nursery still runs until its first checkpoint: start nothing then.
            await trio.lowlevel.checkpoint()
            decision = self._steps.decide(ps, draining=self._draining)
            if isinstance(decision, Skip):
                self._steps.skip(ps, decision)
            elif isinstance(decision, Fail):
                self._steps.fail(ps, decision.error, decision.kind)
            else:
                await self._run_step(ps)
        finally:
            self._ended(sid)

    def _ended(self, sid: str) -> None:
        """Start the steps whose last dependency ``sid`` was (the machine drops the views no step left reads)."""
        assert self._steps_nursery is not None
        for dependent in self._steps.ended(sid):
            self._steps_nursery.start_soon(self._step_task, dependent)

    async def _connected(self, ps: PlannedStep) -> bool:
        """Wait for the step's server; False when the step ended without it (interrupted, or not reached)."""
        try:
            await self._wait_for(self._link(ps.server))
        except Drained:
            self._steps.finished(ps, StepStatus.INTERRUPTED)
            return False
        except McpRunError as exc:
            self._steps.fail(ps, first_line(exc), failure_kind(exc))
            return False
        return True

    async def _run_step(self, ps: PlannedStep) -> None:
        masker = self._log.masker
        found = self._steps.items(ps, masker.secrets_in if masker else _no_secrets)  # no secrets: none to find
        if found is None:
            return
        items, keys = found
        reused = self._steps.start(ps, items, keys)
        if reused < len(items) and not await self._connected(ps):
            return
        render = args_renderer(ps, self._steps.context)
        entries: list[Any] = [None] * len(items) if ps.referenced else []
        positions = iter(range(len(items)))
        workers = min(len(items), ps.concurrency or self._plan.servers[ps.server].server.max_concurrency)

        async def worker() -> None:
            for index in positions:
                if self._draining:
                    return
                entry = await self._item(ps, index if ps.fan_out else None, items[index], keys[index], render)
                if entries:
                    entries[index] = entry

        async with trio.open_nursery() as pool:
            for _ in range(max(workers, 1)):
                pool.start_soon(worker)
        if ps.reconcile is not None and not self._draining:
            await self._reconcile_left(ps, items, keys, entries, render, workers)
        self._steps.finish(ps, items, keys, entries, draining=self._draining)

    async def _reconcile_left(
        self, ps: PlannedStep, items: list[Any], keys: list[str], entries: list[Any], render: ArgsRenderer, workers: int
    ) -> None:
        """At the end of a step with ``reconcile:``, ask its reconcile tool about each item its calls left in
        doubt in this attempt (``at_end``: only ``done`` is acted on; see :mod:`runner.engine.core.reconcile`)."""
        asked = self._asked.pop(ps.id, set())
        at = {key: i for i, key in enumerate(keys)}
        left = iter(left_in_doubt(self._state.step(ps.id), keys, asked))

        async def asker() -> None:
            for key in left:
                i = at[key]
                index = i if ps.fan_out else None
                args = rendered_args(render, items[i], index)
                if isinstance(args, ArgsFailed) or self._draining:
                    continue
                _settled, entry = await self._reconcile(ps, index, key, items[i], args, at_end=True)
                if entries and entry is not None:
                    entries[i] = entry

        async with trio.open_nursery() as pool:
            for _ in range(max(workers, 1)):
                pool.start_soon(asker)

    # -- items -----------------------------------------------------------------------------------------

    async def _item(
        self,
        ps: PlannedStep,
        index: int | None,
        item: Any,
        key: str,
        render: ArgsRenderer,
    ) -> dict[str, Any] | None:
        prior = self._steps.prior(ps.id, key)
        action = self._steps.action(ps.id, key)
        if not action.calls and action not in (ItemAction.COLLECT, ItemAction.RECONCILE):
            return _settled(prior, action)
        args = rendered_args(render, item, index)
        if isinstance(args, ArgsFailed):
            if action is ItemAction.RECONCILE:
                return item_entry("failed", args.error)  # it may have run: it stays in doubt, nothing recorded
            return item_entry("failed", self._item_failed(ps, index, key, FailureKind.TEMPLATE_ERROR, args.error))
        if action is ItemAction.RECONCILE:
            settled, entry = await self._reconcile(ps, index, key, item, args)
            if settled:
                self._asked.setdefault(ps.id, set()).add(key)  # (still in doubt: not asked again at the step's end)
                return entry
            action = ItemAction.CALL  # surely not run: called, as a call never made is
        try:
            cached = self._steps.cached(ps, item, index, args) if action.calls else None
        except TemplateError as exc:
            return item_entry("failed", self._item_failed(ps, index, key, FailureKind.TEMPLATE_ERROR, str(exc)))
        if cached is not None and cached.hit is not None:
            return self._steps.reuse(ps, index, key, cached)
        try:
            result = await self._call(ps, index, key, args, prior, action)
        except Drained:
            return None
        except JournalWriteError:
            raise  # nothing may be dispatched unrecorded: the run stops
        except McpRunError as exc:
            return item_entry("failed", self._call_failed(ps, index, key, exc))
        if result.is_error:
            text = result.text or "tool reported an error"
            self._item_failed(ps, index, key, FailureKind.TOOL_ERROR, text, result.raw)
            return item_entry("failed", text, result.raw)
        self._notes.settle(ps.id, key)  # the item's last progress and its log count, before its result
        digest = cached.digest if cached is not None else None
        self._log.record(ItemSucceeded(step=ps.id, item=key, index=index, result=result.raw, cache=digest))
        # The entry (its text parsed as JSON, among others) is made only for a step whose results are kept.
        return item_entry("succeeded", None, result.raw) if ps.referenced else None

    async def _reconcile(
        self, ps: PlannedStep, index: int | None, key: str, item: Any, args: dict[str, Any], *, at_end: bool = False
    ) -> tuple[bool, dict[str, Any] | None]:
        """Ask the step's reconcile tool whether the call of an item in doubt happened, and journal the verdict
        (fsynced) before acting on it (:mod:`runner.engine.core.reconcile`). Returns whether that settled the
        item, and its entry: (True, entry) done or still in doubt, (False, None) not done (to be called now).
        ``at_end``: asked at the end of the step whose call left it in doubt (a "not done" is not acted on)."""
        spec = ps.reconcile
        assert spec is not None
        context = reconcile_context(self._steps.context(item, index), key, args)
        call_args = reconcile_args(spec, context)
        result: dict[str, Any] | None = None
        error = call_args.error if isinstance(call_args, ArgsFailed) else None
        if not isinstance(call_args, ArgsFailed):
            try:
                result, error = await self._ask_reconcile(ps, spec, call_args)
            except Drained:
                return True, None  # the run is stopping: the item did not end (still in doubt)
            except McpRunError as exc:
                self._log.masker.scrub(exc)
                error = first_line(exc)
        record = verdict(spec, context, step=ps.id, key=key, index=index, result=result, error=error, at_end=at_end)
        await self._log.commit(record)  # durable before it acts: a crash after it cannot call the item twice
        return verdict_entry(record, referenced=ps.referenced)

    async def _ask_reconcile(
        self, ps: PlannedStep, spec: PlannedReconcile, args: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, str | None]:
        """The reconcile tool's result (or why there is none). A request that surely did not reach the server
        (its session was lost: the call that left the item in doubt often took it down) goes out again on the
        next session, up to :data:`~runner.engine.calls.servers.SAFE_SENDS` times in all (the tool is safe to
        repeat): :func:`~runner.engine.calls.servers.until_delivered`."""
        link = self._link(ps.server)

        async def ask(session: Session) -> tuple[dict[str, Any] | None, str | None]:
            if not spec.idempotent and not await self._trusted_safe(ps, session, spec.tool):
                return None, f"the server does not annotate {spec.tool!r} as read-only or idempotent"
            answer = await session.call_tool(spec.tool, args, timeout=ps.timeout, idle_timeout=ps.idle_timeout)
            return answer.raw, None

        return await until_delivered(link, lambda: self._wait_for(link), ask)

    async def _trusted_safe(self, ps: PlannedStep, session: Session, tool: str) -> bool:
        """A trusted server annotates ``tool`` as read-only or idempotent (the tool list asked if need be)."""
        if not self._trusted(ps):
            return False
        found = await self._tools.tool(ps.server, session, tool)
        return found is not None and (found.annotations.read_only or found.annotations.idempotent)

    async def _call(
        self,
        ps: PlannedStep,
        index: int | None,
        key: str,
        args: dict[str, Any],
        prior: ItemState | None,
        action: ItemAction,
    ) -> ToolResult:
        # An item in doubt re-run by decision may have run already: a refusal by the check would record
        # "not sent" and lose that; it goes out unchecked, as a retry does.
        again = action is ItemAction.RERUN
        call = ItemCall(self._sites[ps.server], self._link(ps.server), ps, index, key, args, sent_before=again)
        if action is ItemAction.COLLECT and prior is not None and prior.task_id is not None:
            return await call.collect(prior.task_id)  # a task an earlier attempt started (runner.engine.calls.task)
        return await call.run()

    def _call_failed(self, ps: PlannedStep, index: int | None, key: str, exc: McpRunError) -> str:
        # A reply that could not be read is a lost result: the server may have done the work.
        kind = FailureKind.OUTCOME_UNKNOWN if isinstance(exc, MalformedMessage) else failure_kind(exc)
        self._log.masker.scrub(exc)  # a server's stderr tail is masked raw, before str() indents it
        error = str(exc) + (IDLE_HINT if isinstance(exc, CallTimeout) and exc.idle else "")
        return self._item_failed(ps, index, key, kind, error)

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

    def _trusted(self, ps: PlannedStep) -> bool:
        return self._plan.servers[ps.server].server.trust_annotations

    async def _safe_to_repeat(self, ps: PlannedStep, *, connect: bool = False) -> bool:
        trusted = self._trusted(ps)
        if not reads_annotations(ps, trusted):
            return is_safe_to_repeat(ps, trusted, None)
        link = self._link(ps.server)
        session = await self._wait_for(link) if connect else link.current()
        tool = await self._tools.tool(ps.server, session, ps.tool) if session is not None else None
        return is_safe_to_repeat(ps, trusted, tool)

    def _known_safe(self, ps: PlannedStep, session: Session) -> bool:
        """Safe to repeat by what is known now, asking nothing (the step says so, or the server is trusted and
        the tool list ``session`` already has annotates the tool so): a call safe to repeat need not wait for
        its dispatch record to be fsynced. Not known is not safe."""
        trusted = self._trusted(ps)
        tool = self._tools.known(session, ps.tool) if reads_annotations(ps, trusted) else None
        return is_safe_to_repeat(ps, trusted, tool)

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
        """The server's link, started on first use (see :mod:`runner.engine.calls.servers`)."""
        link = self._links.get(name)
        if link is not None:
            return link
        ps = self._plan.servers[name]
        server = ps.server
        policy = LinkPolicy(
            connect_timeout=ps.connect_within(self._options.connect_timeout),
            reconnect=ps.reconnect,
            retry_first=ps.transport == "http",
            backoff=self._options.backoff,
            max_concurrency=ps.max_concurrency,
            rate=ps.rate,
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
            durable=has_unsafe_calls(self._plan, name),
            tracer=self._options.tracer,
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
                    era=None if event.reconnects else session.era_why,
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
        elif isinstance(event, LinkThrottled):
            self._log.record(throttled_event(event))
            if event.cut:
                self._warn(throttled_line(event))

    def _on_log(self, server: str, message: McpLogMessage, rid: Any) -> None:
        where = self._in_flight.get((server, rid)) if rid is not None else None
        self._notes.log(server, where, message)


def throttled_line(event: LinkThrottled) -> str:
    """The plain line a throttle that lowered a server's pace gets: ``server api: throttled (429), pausing 1.0 s;
    running 4 at a time, 16.0 calls/s``."""
    asked = "" if event.asked else " (backoff)"
    pace = f"; running {event.limit} at a time"
    if event.rate is not None:
        pace += f", {event.rate:.1f} calls/s"
    return f"server {event.server}: throttled ({event.status}), pausing {event.pause:.1f} s{asked}{pace}"


def _settled(prior: ItemState | None, action: ItemAction) -> dict[str, Any]:
    """The entry of an item an earlier attempt settled: succeeded (reused), or skipped in doubt (by this
    resume, or an earlier one: never called again). A local run carries out a decision before it runs, so
    the fold gives its items in doubt as one of these (no ``ACCEPT`` or ``SKIP`` here)."""
    if action is ItemAction.REUSE and prior is not None:
        return item_entry("succeeded", None, prior.result)
    return settled_entry(prior)


def _no_secrets(text: str) -> list[str]:
    return []
