"""The trio engine that runs a plan: steps as their dependencies finish, fan-outs through bounded worker
pools, one shared session per server, every state change journaled.

The scheduler does not know transports: it is handed an ``opener`` that turns a server name (and the
session options the scheduler wants, with its log routing) into an open session.

Rules it keeps (the README states them for users):

- A step runs when every dependency succeeded (a ``continue_on_error`` step counts as succeeded); ``if``
  false skips it; a failed or skipped dependency skips it.
- A failed fan-out item does not stop its siblings; the step fails at the end if any item failed. Once a
  step has failed (without ``continue_on_error``), no new step starts; fan-outs already running go on.
  Calls already dispatched are never cancelled because something else failed.
- Concurrency is bounded globally, per server (``max_concurrency``) and per step (``concurrency``); a
  fan-out of 100,000 items runs through that many workers, not 100,000 tasks, and keeps results in memory
  only when some template or output reads them.
- Each call's dispatch is journaled durably *before* the request is written; its result after it arrives.
  Requests that surely never left are retried with backoff; a call whose outcome is unknown is retried
  only when safe (see :mod:`runner.engine.retry`), otherwise it is reported *in doubt*.
- ``drain()`` (first interrupt) stops dispatching; ``cancel()`` (second, or after the grace period)
  cancels calls in flight, which send ``notifications/cancelled`` and are journaled as cancelled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

import trio

from runner.backoff import Backoff
from runner.engine.eventlog import EventLog, JournalWriteError
from runner.engine.journal import IN_DOUBT_KINDS, RunState
from runner.engine.retry import RetryPolicy, failure_kind, is_safe_to_repeat
from runner.engine.supervisor import (
    LinkEvent,
    LinkFailed,
    LinkLost,
    LinkOpened,
    LinkPolicy,
    LinkRetrying,
    ServerLink,
)
from runner.errors import (
    CallTimeout,
    JsonRpcError,
    MalformedMessage,
    McpRunError,
    NotDelivered,
    OutcomeUnknown,
    SessionExpired,
)
from runner.exitcodes import ExitCode, combine
from runner.protocol.mcp import LogMessage, Progress, Tool, ToolResult
from runner.session import Session, SessionOptions
from runner.workflow.context import fanout_view, item_entry, make_context, step_view
from runner.workflow.plan import DEFAULT_CONNECT_TIMEOUT, DEFAULT_RECONNECT, Plan, PlannedStep
from runner.workflow.template import TemplateError

__all__ = ["Outcome", "Prior", "Scheduler", "SchedulerOptions", "SessionOpener"]

SessionOpener = Callable[[str, SessionOptions], AbstractAsyncContextManager[Session]]

KIND_EXIT: dict[str, ExitCode] = {
    "tool-error": ExitCode.FAILED,
    "template-error": ExitCode.FAILED,
    "skipped-in-doubt": ExitCode.FAILED,
    "protocol-error": ExitCode.PROTOCOL,
    "connection-before-send": ExitCode.UNREACHABLE,
    "outcome-unknown": ExitCode.OUTCOME_UNKNOWN,
    "timeout": ExitCode.OUTCOME_UNKNOWN,
    "cancelled": ExitCode.OUTCOME_UNKNOWN,
}


@dataclass(frozen=True)
class SchedulerOptions:
    """``retry`` bounds calling again a tool that is safe to repeat after its outcome was unknown;
    ``connect_timeout`` is the default for servers that set none; ``backoff`` paces every wait."""

    concurrency: int = 16
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    server_log_level: str | None = "info"
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    backoff: Backoff = field(default_factory=Backoff)


@dataclass
class Prior:
    """What a resumed run brings from its journal."""

    state: RunState
    in_doubt: str = "ask"  # what to do with unsafe in-doubt items: "ask" (stop), "rerun" or "skip"
    fresh_steps: set[str] = field(default_factory=set)  # changed steps: their history is ignored
    skip: set[tuple[str, str]] = field(default_factory=set)  # filled by the scheduler


@dataclass
class StepReport:
    status: str = "pending"
    reason: str | None = None
    total: int = 0
    succeeded: int = 0
    failed: int = 0
    in_doubt: int = 0
    skipped: int = 0
    reused: int = 0
    unreachable: int = 0  # of the failed: never delivered (their server could not be reached)

    def counts(self) -> dict[str, int]:
        return {
            "total": self.total,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "in_doubt": self.in_doubt,
            "skipped": self.skipped,
            "reused": self.reused,
        }


@dataclass
class Outcome:
    status: str
    exit_code: ExitCode
    steps: dict[str, StepReport]
    outputs: dict[str, Any]
    failures: list[dict[str, Any]]
    in_doubt: list[dict[str, Any]]
    blocked: bool = False  # stopped before running: in-doubt items need a decision
    # server -> what it sent that matched nothing (lines that are not JSON-RPC, responses to ids never
    # sent), summed over its sessions; only servers with something to report
    stray: dict[str, dict[str, int]] = field(default_factory=dict)


MAX_RENEWED = 3  # a call refused because the server forgot the session, sent again on a renewed one
SKIPPED_NOW = "in doubt; skipped by --skip-in-doubt"
SKIPPED_BEFORE = "was in doubt and skipped by an earlier resume (--rerun-in-doubt calls it again)"


class _Drained(McpRunError):
    """An interrupt arrived before the request was dispatched: the item did not run (nothing to record)."""


def _line(error: BaseException) -> str:
    return str(error).split("\n", 1)[0]


class Scheduler:
    def __init__(
        self,
        plan: Plan,
        *,
        inputs: Mapping[str, Any],
        env: Mapping[str, Any],
        opener: SessionOpener,
        log: EventLog,
        options: SchedulerOptions | None = None,
        prior: Prior | None = None,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self._plan = plan
        self._inputs = inputs
        self._env = env
        self._opener = opener
        self._log = log
        self._options = options or SchedulerOptions()
        self._prior = prior
        self._on_warning = on_warning
        self._views: dict[str, Any] = {}
        self._reports: dict[str, StepReport] = {sid: StepReport() for sid in plan.order}
        self._done: dict[str, trio.Event] = {sid: trio.Event() for sid in plan.order}
        self._codes: set[ExitCode] = set()
        self._failures: list[dict[str, Any]] = []
        self._in_doubt: list[dict[str, Any]] = []
        self._stop_new: str | None = None
        self._draining = False
        self._work_scope: trio.CancelScope | None = None
        self._links: dict[str, ServerLink] = {}
        self._sessions: dict[str, dict[int, Session]] = {}  # every session each server had, for its stats
        self._tools: dict[tuple[str, int], dict[str, Tool]] = {}  # (server, id of the session) -> tools
        self._waiting: set[trio.CancelScope] = set()  # items waiting for a server: a drain stops them
        self._attempted: set[tuple[str, str]] = set()  # (step, item) this invocation decided or called
        self._sessions_nursery: trio.Nursery | None = None
        self._inflight: dict[tuple[str, Any], tuple[str, str]] = {}
        self._global = trio.CapacityLimiter(self._options.concurrency)
        self._server_limits = {
            name: trio.CapacityLimiter(ps.server.max_concurrency) for name, ps in plan.servers.items()
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
            try:
                with trio.CancelScope() as scope:
                    self._work_scope = scope
                    blocked = await self._resolve_in_doubt()
                    if blocked:
                        return self._blocked_outcome(blocked)
                    async with trio.open_nursery() as steps:
                        for sid in self._plan.order:
                            steps.start_soon(self._step_task, sid)
            finally:
                for link in self._links.values():
                    link.close()
        return self._finish()

    async def _resolve_in_doubt(self) -> list[dict[str, Any]]:
        """Decide, before anything runs, what happens to items a previous run left in doubt. Returns the
        ones that block the run (unsafe, and neither --rerun-in-doubt nor --skip-in-doubt given)."""
        prior = self._prior
        if prior is None:
            return []
        blocked: list[dict[str, Any]] = []
        for sid, item in prior.state.in_doubt():
            if sid not in self._plan.steps or sid in prior.fresh_steps:
                continue
            ps = self._plan.steps[sid]
            try:
                safe = await self._safe_to_repeat(ps, connect=True)
            except (McpRunError, _Drained):
                safe = False
            if safe or prior.in_doubt == "rerun":
                continue
            if prior.in_doubt == "skip":
                # The decision is journaled now, before anything runs: it holds even if this resume never
                # reaches the step (its server cannot be reached, an interrupt).
                prior.skip.add((sid, item.key))
                self._log.record(
                    "item_failed",
                    step=sid,
                    item=item.key,
                    index=item.index,
                    kind="skipped-in-doubt",
                    error=SKIPPED_NOW,
                )
                continue
            blocked.append(
                {
                    "step": sid,
                    "item": item.key,
                    "index": item.index,
                    "dispatched_at": item.dispatched_at,
                    "kind": item.kind or "outcome-unknown",
                    "error": item.error or "dispatched; no result recorded",
                }
            )
        return blocked

    def _blocked_outcome(self, blocked: list[dict[str, Any]]) -> Outcome:
        for sid in self._plan.order:
            self._reports[sid].status = "not-run"
        return Outcome(
            status="in-doubt",
            exit_code=ExitCode.OUTCOME_UNKNOWN,
            steps=self._reports,
            outputs={},
            failures=[],
            in_doubt=blocked,
            blocked=True,
        )

    def _leftover_in_doubt(self) -> None:
        """Items an earlier attempt left in doubt that this one neither decided nor called again (their step
        did not run: a dependency failed, an interrupt) are still in doubt: the run must stay open."""
        prior = self._prior
        if prior is None:
            return
        for sid, item in prior.state.in_doubt():
            if sid not in self._plan.steps or sid in prior.fresh_steps or (sid, item.key) in prior.skip:
                continue
            if (sid, item.key) in self._attempted:
                continue
            self._in_doubt.append(
                {
                    "step": sid,
                    "item": item.key,
                    "index": item.index,
                    "dispatched_at": item.dispatched_at,
                    "kind": item.kind or "outcome-unknown",
                    "error": item.error or "dispatched; no result recorded (not called again: its step did not run)",
                }
            )
            self._codes.add(ExitCode.OUTCOME_UNKNOWN)

    def _finish(self) -> Outcome:
        self._leftover_in_doubt()
        for report in self._reports.values():
            if report.status in ("pending", "running"):
                report.status = "not-run"
        outputs: dict[str, Any] = {}
        if not self._draining:
            try:
                outputs = self._plan.render_outputs(self._context())
            except TemplateError as exc:
                self._warn(f"outputs: {exc}")
                self._codes.add(ExitCode.FAILED)
        # Open (resumable) unless every item has a definite answer: in doubt, or left undone because a
        # server could not be reached.
        if self._draining:
            status = "interrupted"
        elif self._in_doubt:
            status = "in-doubt"
        elif ExitCode.UNREACHABLE in self._codes:
            status = "incomplete"
        elif any(c != ExitCode.OK for c in self._codes):
            status = "failed"
        else:
            status = "succeeded"
        return Outcome(
            status=status,
            exit_code=combine(self._codes),
            steps=self._reports,
            outputs=outputs,
            failures=self._failures,
            in_doubt=self._in_doubt,
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
        report = self._reports[sid]
        try:
            for dep in ps.dependencies:
                await self._done[dep].wait()
            blocked = self._blocked_by(ps)
            if blocked is not None:
                self._skip(ps, blocked)
                return
            try:
                if not ps.should_run(self._context()):
                    self._skip(ps, "its `if` condition is false")
                    return
            except TemplateError as exc:
                self._fail_step(ps, f"if: {exc}", "template-error")
                return
            report.status = "running"
            await self._run_step(ps, report)
        finally:
            self._done[sid].set()

    def _blocked_by(self, ps: PlannedStep) -> str | None:
        for dep in ps.dependencies:
            status = self._reports[dep].status
            if status == "failed" and not self._plan.steps[dep].continue_on_error:
                return f"dependency {dep!r} failed"
            if status == "incomplete":
                return f"dependency {dep!r} is incomplete (its server could not be reached)"
            if status not in ("succeeded", "failed"):
                return f"dependency {dep!r} was {status}"
        if self._draining:
            return "the run was interrupted"
        if self._stop_new is not None:
            return f"step {self._stop_new!r} failed"
        return None

    def _skip(self, ps: PlannedStep, reason: str) -> None:
        report = self._reports[ps.id]
        report.status = "skipped"
        report.reason = reason
        self._views[ps.id] = fanout_view([], [], "skipped") if ps.fan_out else step_view(None, status="skipped")
        self._log.record("step_skipped", step=ps.id, reason=reason)

    def _fail_step(self, ps: PlannedStep, error: str, kind: str) -> None:
        report = self._reports[ps.id]
        # A server that could not be reached leaves the step undone, not failed: a resume runs it.
        unreachable = kind == "connection-before-send"
        report.status = "incomplete" if unreachable else "failed"
        report.reason = error
        self._views[ps.id] = step_view(None, status="failed") if not ps.fan_out else fanout_view([], [], "failed")
        self._failures.append({"step": ps.id, "item": None, "index": None, "kind": kind, "error": error})
        if unreachable:
            self._codes.add(ExitCode.UNREACHABLE)
        elif not ps.continue_on_error:
            self._codes.add(KIND_EXIT.get(kind, ExitCode.FAILED))
            self._stop_new = self._stop_new or ps.id
        self._log.record("step_finished", step=ps.id, status=report.status, error=error, counts=report.counts())

    async def _run_step(self, ps: PlannedStep, report: StepReport) -> None:
        if ps.fan_out:
            try:
                items = ps.render_items(self._context())
                keys = self._keys(ps, items)
            except TemplateError as exc:
                self._fail_step(ps, f"for_each: {exc}", "template-error")
                return
        else:
            items, keys = [None], [""]
        report.total = len(items)
        reused = sum(1 for key in keys if self._reused(ps.id, key))
        self._log.record(
            "step_started",
            step=ps.id,
            **({"items": len(items)} if ps.fan_out else {}),
            **({"reused": reused} if reused else {}),
        )
        if reused < len(items):
            try:
                await self._wait_for(self._link(ps.server))
            except _Drained:
                report.status = "interrupted"
                self._log.record("step_finished", step=ps.id, status=report.status, counts=report.counts())
                return
            except McpRunError as exc:
                report.succeeded = report.reused = reused  # what earlier attempts did stays done
                self._fail_step(ps, _line(exc), failure_kind(exc))
                return
        keep = ps.referenced
        results: list[Any] = [None] * len(items) if keep else []
        single: dict[str, Any] | None = None
        positions = iter(range(len(items)))
        workers = min(len(items), ps.concurrency or self._plan.servers[ps.server].server.max_concurrency)

        async def worker() -> None:
            nonlocal single
            for index in positions:
                if self._draining:
                    return
                entry = await self._item(ps, index if ps.fan_out else None, items[index], keys[index])
                if keep:
                    if ps.fan_out:
                        results[index] = entry
                    else:
                        single = entry

        async with trio.open_nursery() as pool:
            for _ in range(max(workers, 1)):
                pool.start_soon(worker)
        if self._draining and report.succeeded + report.failed + report.in_doubt + report.skipped < report.total:
            report.status = "interrupted"
        elif report.unreachable and not report.in_doubt and report.failed == report.unreachable:
            report.status = "incomplete"
        else:
            report.status = "failed" if (report.failed or report.in_doubt) else "succeeded"
        if ps.fan_out:
            self._views[ps.id] = fanout_view(items if keep else [], results, _view_status(report.status))
        else:
            view = single or step_view(None, status=_view_status(report.status))
            view.pop("error", None)
            self._views[ps.id] = view
        if report.status == "failed" and not ps.continue_on_error:
            self._stop_new = self._stop_new or ps.id
        self._log.record("step_finished", step=ps.id, status=report.status, counts=report.counts())

    def _keys(self, ps: PlannedStep, items: list[Any]) -> list[str]:
        keys: list[str] = []
        seen: dict[str, int] = {}
        for index, item in enumerate(items):
            key = ps.render_key(self._context(item, index))
            first = seen.setdefault(key, index)
            if first != index:
                raise TemplateError(
                    f"items {first} and {index} of step {ps.id!r} have the same key {key!r}; "
                    "give the step a `key` that tells them apart"
                )
            keys.append(key)
        return keys

    # -- items -----------------------------------------------------------------------------------------

    def _reused(self, sid: str, key: str) -> bool:
        prior = self._prior_item(sid, key)
        return prior is not None and prior.status == "succeeded"

    async def _item(self, ps: PlannedStep, index: int | None, item: Any, key: str) -> dict[str, Any] | None:
        report = self._reports[ps.id]
        self._attempted.add((ps.id, key))
        prior = self._prior_item(ps.id, key)
        if prior is not None:
            if prior.status == "succeeded":
                report.succeeded += 1
                report.reused += 1
                return item_entry("succeeded", None, prior.result)
            assert self._prior is not None
            skipped_now = prior.in_doubt and (ps.id, key) in self._prior.skip
            if skipped_now or (prior.status == "skipped" and self._prior.in_doubt != "rerun"):
                # Skipped (journaled when this resume decided it, or by an earlier one): never called again
                # unless --rerun-in-doubt says so.
                error = SKIPPED_NOW if skipped_now else SKIPPED_BEFORE
                report.failed += 1
                self._failures.append(
                    {"step": ps.id, "item": key, "index": index, "kind": "skipped-in-doubt", "error": error}
                )
                self._codes.add(ExitCode.FAILED)
                return item_entry("failed", error)
        try:
            args = ps.render_args(self._context(item, index))
        except TemplateError as exc:
            self._item_failed(ps, index, key, "template-error", str(exc))
            return item_entry("failed", str(exc))
        if not isinstance(args, dict):
            error = f"args rendered to {type(args).__name__}, expected an object"
            self._item_failed(ps, index, key, "template-error", error)
            return item_entry("failed", error)
        try:
            result = await _ItemCall(self, ps, index, key, args).run()
        except _Drained:
            return None
        except JournalWriteError:
            raise  # nothing may be dispatched unrecorded: the run stops
        except McpRunError as exc:
            # A reply that could not be read is a lost result: the server may have done the work.
            kind = "outcome-unknown" if isinstance(exc, MalformedMessage) else failure_kind(exc)
            error = str(exc)
            if isinstance(exc, CallTimeout) and exc.idle:
                error += " (a slow tool without progress notifications needs a longer idle_timeout, or none)"
            return item_entry("failed", self._item_failed(ps, index, key, kind, error))
        if result.is_error:
            text = result.text or "tool reported an error"
            self._item_failed(ps, index, key, "tool-error", text, result.raw)
            return item_entry("failed", text, result.raw)
        report.succeeded += 1
        self._log.record("item_succeeded", step=ps.id, item=key, index=index, result=result.raw)
        # The entry (its text parsed as JSON, among others) is made only for a step whose results are kept.
        return item_entry("succeeded", None, result.raw) if ps.referenced else None

    def _prior_item(self, sid: str, key: str) -> Any:
        if self._prior is None or sid in self._prior.fresh_steps:
            return None
        return self._prior.state.item(sid, key)

    def _item_failed(
        self,
        ps: PlannedStep,
        index: int | None,
        key: str,
        kind: str,
        error: str,
        result: dict[str, Any] | None = None,
    ) -> str:
        report = self._reports[ps.id]
        entry = {"step": ps.id, "item": key, "index": index, "kind": kind, "error": error}
        if kind in IN_DOUBT_KINDS:
            report.in_doubt += 1
            self._in_doubt.append(entry)
            self._codes.add(ExitCode.OUTCOME_UNKNOWN)
        elif kind == "connection-before-send":
            # Surely never run: the item is left for a resume, whatever continue_on_error says.
            report.failed += 1
            report.unreachable += 1
            self._failures.append(entry)
            self._codes.add(ExitCode.UNREACHABLE)
        else:
            report.failed += 1
            self._failures.append(entry)
            if not ps.continue_on_error:
                self._codes.add(KIND_EXIT.get(kind, ExitCode.FAILED))
        self._log.record("item_failed", step=ps.id, item=key, index=index, kind=kind, error=error, result=result)
        return error

    async def _safe_to_repeat(self, ps: PlannedStep, *, connect: bool = False) -> bool:
        if ps.idempotent:
            return True
        if not self._plan.servers[ps.server].server.trust_annotations:
            return False
        link = self._link(ps.server)
        session = await self._wait_for(link) if connect else link.current()
        tool = await self._tool(ps.server, session, ps.tool) if session is not None else None
        if tool is None:
            return False
        return is_safe_to_repeat(
            idempotent_step=False,
            trusted=True,
            read_only=tool.annotations.read_only,
            idempotent_tool=tool.annotations.idempotent,
        )

    async def _tool(self, server: str, session: Session, name: str) -> Tool | None:
        tools = self._tools.get((server, id(session)))
        if tools is None:
            tools = self._tools[(server, id(session))] = {t.name: t for t in await session.list_tools()}
        return tools.get(name)

    # -- sessions --------------------------------------------------------------------------------------

    async def _wait_for(self, link: ServerLink) -> Session:
        """The link's session, waiting while its server is being (re)connected; ``_Drained`` when an
        interrupt comes first (the run dispatches nothing new)."""
        if self._draining:
            raise _Drained("the run is being interrupted; not dispatching")
        with trio.CancelScope() as scope:
            self._waiting.add(scope)
            try:
                return await link.session()
            finally:
                self._waiting.discard(scope)
        raise _Drained("the run is being interrupted; not dispatching")

    def _link(self, name: str) -> ServerLink:
        """The server's link, started on first use (see :mod:`runner.engine.supervisor`)."""
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
            on_log=lambda message, rid: self._on_log(name, message, rid),
            on_warning=self._warn,
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
            extra: dict[str, Any] = {}
            if event.reconnects:
                extra = {"reconnects": event.reconnects, "down_s": round(event.down_for or 0.0, 3)}
            self._log.record(
                "session_opened",
                server=event.server,
                protocol_version=session.protocol_version,
                server_info=session.server_info,
                **extra,
            )
        elif isinstance(event, LinkLost):
            self._log.record("session_lost", server=event.server, error=_line(event.error))
        elif isinstance(event, LinkRetrying):
            self._log.record(
                "session_retrying",
                server=event.server,
                attempt=event.attempt,
                delay_s=round(event.delay, 3),
                remaining_s=round(event.remaining, 3),
                error=_line(event.error),
            )
        elif isinstance(event, LinkFailed):
            self._log.record(
                "session_failed", server=event.server, kind=failure_kind(event.error), error=str(event.error)
            )

    def _on_log(self, server: str, message: LogMessage, rid: Any) -> None:
        where = self._inflight.get((server, rid)) if rid is not None else None
        fields: dict[str, Any] = {"server": server, "level": message.level, "logger": message.logger}
        if where is not None:
            fields["step"], fields["item"] = where
        self._log.note("log", data=message.data, **fields)


class _ItemCall:
    """One item's tool call across its attempts (the scheduler's item path).

    Each attempt asks the server's link for the current session (waiting while the server is being
    reconnected), journals its dispatch durably before the request is written (``before_send``), and
    classifies how it ended:

    - a result (``isError`` or not) or a JSON-RPC error: the server answered; returned or raised;
    - ``NotDelivered``: the request surely never reached the server; the link is told the connection is
      gone and the call goes out again on the next session (the link's reconnect budget bounds this);
    - ``OutcomeUnknown``: sent, result lost; called again (after the backoff) only when the tool is safe
      to repeat and within ``RetryPolicy.attempts``, else raised (in doubt).

    An attempt that ends without an answer after its dispatch was journaled gets an ``item_failed`` record
    with ``retrying: true`` before the next one, so the journal tells every attempt apart.
    """

    def __init__(self, scheduler: Scheduler, ps: PlannedStep, index: int | None, key: str, args: dict[str, Any]):
        self._s = scheduler
        self._ps = ps
        self._index = index
        self._key = key
        self._args = args
        self._attempt = 0
        self._dispatched: list[Any] = []  # request ids of the current attempt, once journaled

    async def run(self) -> ToolResult:
        s, ps = self._s, self._ps
        link = s._link(ps.server)
        policy = s._options.retry
        unknown = 0  # attempts whose outcome was unknown
        renewed = 0  # sessions the server forgot in a row (each re-initialized by the session)
        started = trio.current_time()
        while True:
            session = await s._wait_for(link)
            try:
                result = await self._one_attempt(session)
            except SessionExpired as exc:
                # Refused, not run: the session was renewed; send again on it (a few times, then the link
                # decides whether the server is usable at all).
                self._ended(exc)
                renewed += 1
                if renewed > MAX_RENEWED:
                    link.lost(session, exc)
                    renewed = 0
                continue
            except NotDelivered as exc:
                link.lost(session, exc)
                self._ended(exc)
                continue
            except OutcomeUnknown as exc:
                unknown += 1
                delay = s._options.backoff.delay(unknown - 1)
                late = unknown >= policy.attempts or trio.current_time() + delay - started > policy.total
                if late or not await self._safe():
                    raise
                if session.broken is not None:
                    link.lost(session, exc)
                self._ended(exc, retry_in=delay)  # the views say "calling it again in ..."
                await trio.sleep(delay)
                continue
            except JsonRpcError:
                link.healthy()  # it answered
                raise
            link.healthy()
            return result

    async def _safe(self) -> bool:
        """Whether the call may be made again now that its outcome is unknown. Asked only then: listing a
        server's tools to read their annotations must never be what makes an item fail or wait."""
        try:
            return await self._s._safe_to_repeat(self._ps)
        except McpRunError:
            return False

    async def _one_attempt(self, session: Session) -> ToolResult:
        s, ps = self._s, self._ps
        self._attempt += 1
        self._dispatched.clear()
        try:
            async with s._global, s._server_limits[ps.server]:
                if s._draining:
                    raise _Drained("the run is being interrupted; not dispatching")
                return await session.call_tool(
                    ps.tool,
                    self._args,
                    timeout=ps.timeout,
                    idle_timeout=ps.idle_timeout,
                    on_progress=self._on_progress,
                    before_send=self._before_send,
                    on_resumed=self._on_resumed,
                )
        except trio.Cancelled:
            if self._dispatched:
                error = "cancelled after it was sent (the run was stopping); the server may have done it"
                s._log.record(
                    "item_failed", step=ps.id, item=self._key, index=self._index, kind="cancelled", error=error
                )
                s._reports[ps.id].in_doubt += 1
                s._in_doubt.append(
                    {"step": ps.id, "item": self._key, "index": self._index, "kind": "cancelled", "error": error}
                )
            raise
        finally:
            for rid in self._dispatched:
                s._inflight.pop((ps.server, rid), None)

    def _ended(self, exc: McpRunError, *, retry_in: float | None = None) -> None:
        """Journal how a dispatched attempt ended, when another follows (the next journals its own dispatch);
        ``retry_in``: a call safe to repeat is made again after exactly that many seconds."""
        if self._dispatched:
            self._s._log.record(
                "item_failed",
                step=self._ps.id,
                item=self._key,
                index=self._index,
                kind=failure_kind(exc),
                error=_line(exc),
                retrying=True,
                **({"retry_in": round(retry_in, 3)} if retry_in is not None else {}),
            )

    async def _before_send(self, rid: Any, token: Any) -> None:
        s, ps = self._s, self._ps
        if s._draining:
            raise _Drained("the run is being interrupted; not dispatching")
        await s._log.commit(
            "item_dispatched",
            step=ps.id,
            item=self._key,
            index=self._index,
            server=ps.server,
            tool=ps.tool,
            request_id=rid,
            progress_token=token,
            attempt=self._attempt,
        )
        self._dispatched.append(rid)
        s._inflight[(ps.server, rid)] = (ps.id, self._key)

    def _on_progress(self, p: Progress) -> None:
        self._s._log.note(
            "progress", step=self._ps.id, item=self._key, progress=p.progress, total=p.total, message=p.message
        )

    def _on_resumed(self, last_event_id: str) -> None:
        self._s._log.record("stream_resumed", step=self._ps.id, item=self._key, last_event_id=last_event_id)


def _view_status(status: str) -> Any:
    return status if status in ("succeeded", "failed", "skipped") else "failed"
