"""A batch of items of one step, called through the worker's sessions (the trio side of the call activity).

Each item, in the order the activity's attempt finds it:

- ended in an earlier attempt (its outcome is in the markers): that outcome, not called again;
- marked dispatched by an earlier attempt, with no end: **in doubt**, unless the step is safe to repeat
  (``idempotent: true``, or a trusted server whose tool is annotated read-only or idempotent);
- else called: its dispatch marker recorded by the Temporal server *before* the request is written
  (:class:`~runner.temporal.markers.Markers`), its end recorded after.

Outcomes are plain JSON: ``status`` is ``succeeded``, ``failed`` (a definite answer: a tool error, a
JSON-RPC or protocol error, refused before sending), ``in_doubt`` (it may have run), or ``retry`` (surely
not run, or run and safe to repeat: the activity's next attempt calls it again).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

import trio

from runner.engine.calls.retry import (
    RetryPolicy,
    Verdict,
    classify,
    failure_kind,
    is_safe_to_repeat,
    reads_annotations,
    wants_safety,
)
from runner.engine.calls.servers import (
    LinkEvent,
    LinkPolicy,
    LinkThrottled,
    ServerLink,
    answer_policy,
    has_unsafe_calls,
    throttled_event,
    until_delivered,
)
from runner.engine.calls.tools import ToolChecks
from runner.engine.core.vocabulary import FailureKind
from runner.engine.runctl import env_context, make_opener
from runner.errors import (
    InvalidCall,
    McpRunError,
    NotDelivered,
    OutcomeUnknown,
    SessionExpired,
    Throttled,
    first_line,
)
from runner.masking import Masker
from runner.quoting import masking
from runner.secrets_of import collect_secrets, oauth_secret_sink
from runner.session import Session, SessionOptions
from runner.session.options import RequestTracer
from runner.temporal.lost import UNREACHABLE
from runner.temporal.markers import Markers
from runner.temporal.serverlog import log_handlers
from runner.temporal.spec import RunSpec, build_plan_of
from runner.workflow.plan import Plan, PlannedStep

if TYPE_CHECKING:
    from runner.engine.telemetry.otel import Tracing

__all__ = ["IN_DOUBT_FOUND", "THROTTLES_KEPT", "Batch", "Sessions", "ask_reconcile"]

IN_DOUBT_FOUND: Final = (
    "dispatched by an earlier attempt of its activity (the worker was lost before it ended); not sent again"
)
THROTTLES_KEPT: Final = 8  # server_throttled records an outcome carries (its history stays small however often
# a server refuses the call: one refusing everything for its whole reconnect budget refuses each call hundreds of times)


@dataclass
class _Server:
    link: ServerLink
    limit: trio.CapacityLimiter
    # server_throttled records of the link (journal form), until the batch whose call was refused takes them
    heard: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Sessions:
    """The worker's sessions: one per (plan, server), opened on first use in the trio thread's ``nursery``
    and kept for every later activity; with each server's ``max_concurrency``; ``tracer``: their requests
    traced (:mod:`runner.temporal.tracing`)."""

    nursery: trio.Nursery
    tracer: RequestTracer | None = None
    plans: dict[str, Plan] = field(default_factory=dict)
    servers: dict[tuple[str, str], _Server] = field(default_factory=dict)
    maskers: dict[str, Masker] = field(default_factory=dict)
    checks: ToolChecks = field(default_factory=ToolChecks)  # each session's tools; a call's check before it is sent

    def masker(self, spec: RunSpec) -> Masker:
        """The secrets of ``spec``'s run as this worker knows them (its environment, header values): what the
        activity returns is masked with them, so they never enter Temporal's history."""
        key = spec.plan_key
        found = self.maskers.get(key)
        if found is None:
            plan = self.plan(spec)
            found = self.maskers[key] = Masker(collect_secrets(plan, plan.input_values or {}, env_context(plan)))
        return found

    def plan(self, spec: RunSpec) -> Plan:
        key = spec.plan_key
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = build_plan_of(spec)
        return plan

    def server(self, spec: RunSpec, name: str) -> _Server:
        key = (spec.plan_key, name)
        found = self.servers.get(key)
        if found is not None and found.link.error is None:
            return found
        if found is not None:
            found.link.close()  # failed for good: the next attempt gets a fresh link
        plan = self.plan(spec)
        planned = plan.servers[name]
        masker = self.masker(spec)
        opener = make_opener(
            plan,
            plan.input_values or {},
            env_context(plan),
            redact=masker.mask,
            on_secret=oauth_secret_sink(masker),  # OAuth tokens masked before results enter the history
        )
        policy = LinkPolicy(
            connect_timeout=planned.connect_within(),
            reconnect=planned.reconnect,
            retry_first=planned.transport == "http",
            max_concurrency=planned.max_concurrency,
            rate=planned.rate,
        )
        options = session_options(plan, name, policy.connect_timeout, spec.server_log_level, masker)
        if self.tracer is not None:
            options = replace(options, tracer=self.tracer)
        heard: list[dict[str, Any]] = []

        def on_event(event: LinkEvent) -> None:
            if isinstance(event, LinkThrottled):  # as the local scheduler journals it
                heard.append({k: v for k, v in asdict(throttled_event(event)).items() if v is not None})

        link = ServerLink(name, lambda: opener(name, options), policy, on_event=on_event)
        link.start(self.nursery)
        made = self.servers[key] = _Server(link, trio.CapacityLimiter(planned.server.max_concurrency), heard)
        return made

    def close(self) -> None:
        for server in self.servers.values():
            server.link.close()
        self.servers.clear()


def session_options(
    plan: Plan, name: str, initialize_timeout: float, log_level: str | None = "info", masker: Masker | None = None
) -> SessionOptions:
    """Server ``name``'s session options, as the local scheduler builds them (its ``protocol:``, its answers to
    elicitation and roots requests, the log level asked); log messages and warnings go to the worker's stderr,
    masked (:mod:`runner.temporal.serverlog`); the tasks extension is not declared: this engine does not
    follow tasks."""
    server = plan.servers[name].server
    on_log, on_warning = log_handlers(name, log_level, masker if masker is not None else Masker())
    return SessionOptions(
        name=name,
        server_log_level=log_level,
        on_log=on_log,
        on_warning=on_warning,
        initialize_timeout=initialize_timeout,
        protocol=server.protocol,
        answers=answer_policy(plan, name),
        tasks_extension=False,
        durable=has_unsafe_calls(plan, name),
    )


class Batch:
    """One attempt at a batch of ``items`` (``{"key", "index", "args"}``) of step ``step``."""

    def __init__(
        self,
        sessions: Sessions,
        spec: RunSpec,
        step: str,
        items: list[dict[str, Any]],
        markers: Markers,
        retry: RetryPolicy | None = None,
        traced: tuple[Tracing, int] | None = None,
    ) -> None:
        """``retry``: how often a request surely not delivered goes out again on a new session
        (``RetryPolicy.not_delivered``) before the activity's next attempt is left to call it; ``traced``: the
        worker's tracing and the run's trace (each item called is a span of it)."""
        self._sessions = sessions
        self._spec = spec
        self._plan = sessions.plan(spec)
        self._ps: PlannedStep = self._plan.steps[step]
        self._items = items
        self._markers = markers
        self._safe: bool | None = None
        self._retry = retry if retry is not None else RetryPolicy()
        self._traced = traced
        self.sent = 0  # requests written by this attempt
        self._throttles: dict[str, list[dict[str, Any]]] = {}  # per item: the throttles its calls met

    async def run(self, on_done: Callable[[], None] | None = None) -> list[dict[str, Any]]:
        outcomes: list[dict[str, Any]] = [{} for _ in self._items]

        async def one(i: int) -> None:
            outcomes[i] = await self._item(self._items[i])
            if on_done is not None:
                on_done()

        # The calls' arguments hold the worker's secrets: a value quoted into an error is masked before it is cut.
        with masking(self._sessions.masker(self._spec).mask):
            async with trio.open_nursery() as nursery:
                for i in range(len(self._items)):
                    nursery.start_soon(one, i)
        await self._markers.flush()  # the ends, recorded before the activity returns them
        return outcomes

    async def _item(self, item: dict[str, Any]) -> dict[str, Any]:
        key, index = item["key"], item.get("index")
        base: dict[str, Any] = {"key": key, "index": index}
        before = self._markers.ended_before(key)
        if before is not None and before.get("status") != "retry":
            return before
        if self._markers.was_dispatched(key) and not await self._safe_to_repeat():
            out = {**base, "status": "in_doubt", "kind": FailureKind.OUTCOME_UNKNOWN.value, "error": IN_DOUBT_FOUND}
            self._markers.ended(key, out)
            return out
        masker = self._sessions.masker(self._spec)
        # The arguments the workflow rendered are encoded: only the masker's own placeholders (the env the
        # templates saw, secrets masked in earlier results) read back as values; a server's text stays text.
        out = {**base, **await self._traced_call(key, masker.decode_value(item["args"]))}
        progress = self._markers.progress.latest(key)
        self._markers.progress.done(key)
        if progress is not None:
            out["progress"] = progress  # the workflow journals it before the item's end
        throttles = self._throttles.pop(key, None)
        if throttles:
            out["throttled"] = throttles  # server_throttled records: journaled before the item's end too
        out = dict(masker.encode_value(out))  # secrets masked, and any other mark escaped (even without secrets)
        self._markers.ended(key, out)
        return out

    async def _traced_call(self, key: str, args: Any) -> dict[str, Any]:
        """:meth:`_call`, in the item's span when the run is traced; the span ends with the call's status."""
        if self._traced is None:
            return await self._call(key, args)
        tracing, trace_id = self._traced
        with tracing.item(trace_id, self._ps.id, key, server=self._ps.server, tool=self._ps.tool) as span:
            out = await self._call(key, args)
            status = out.get("status", "")
            error = out.get("kind") if status != "succeeded" else None
            span.ended(status, error=error, message=first_line(str(out.get("error", ""))) if error else "")
            return out

    async def _call(self, key: str, args: Any) -> dict[str, Any]:
        ps = self._ps
        server = self._sessions.server(self._spec, ps.server)
        sent = False

        async def before_send(rid: Any, token: Any) -> None:
            nonlocal sent
            await self._markers.dispatched(key)
            sent = True
            self.sent += 1

        undelivered = 0
        checked = False
        sent_at = trio.current_time()
        while True:
            sent = False
            session: Session | None = None
            try:
                async with server.limit:
                    try:
                        session = await server.link.session()
                    except McpRunError as exc:
                        if checked:
                            raise
                        # Never reached, within the server's reconnect budget: as a local step whose server
                        # cannot be reached, the workflow fails the step (incomplete) when all its calls say so.
                        return {"status": UNREACHABLE, "kind": failure_kind(exc).value, "error": first_line(exc)}
                    if not checked:  # as locally: an unknown tool, or arguments its schema refuses, are not sent
                        await self._sessions.checks.check(ps.server, session, ps.tool, args)
                        checked = True
                    sent_at = await server.link.gate.enter()  # the server's pause and pace, as locally
                    try:
                        result = await session.call_tool(
                            ps.tool,
                            args,
                            timeout=ps.timeout,
                            idle_timeout=ps.idle_timeout,
                            before_send=before_send,
                            on_progress=lambda p: self._markers.progress.note(key, p),
                        )
                    finally:
                        server.link.gate.leave()
            except Throttled as exc:
                # Refused before it ran: the link pauses every call to the server; sent again after the pause,
                # within the server's reconnect budget (not counted as a lost session).
                again = server.link.throttled(exc, sent_at=sent_at)
                met = self._throttles.setdefault(key, [])
                met.extend(server.heard[: THROTTLES_KEPT - len(met)])  # what the link heard just now
                server.heard.clear()
                if again:
                    await trio.sleep_until(server.link.pace.paused_until)  # (a refused check passed no gate)
                    continue
                return _failed(exc, await self._verdict(server, None, exc, sent=sent))
            except McpRunError as exc:
                verdict = await self._verdict(server, session, exc, sent=sent)
                undelivered += verdict is Verdict.RESEND
                if verdict is Verdict.RESEND and undelivered < self._retry.not_delivered:
                    continue  # surely not run: again, on a new session
                return _failed(exc, verdict)
            server.link.healthy()
            raw = result.raw if ps.referenced or result.is_error else None
            if result.is_error:
                text = result.text or "tool reported an error"
                return {"status": "failed", "kind": FailureKind.TOOL_ERROR.value, "error": text, "result": raw}
            return {"status": "succeeded", "result": raw}

    async def _verdict(self, server: _Server, session: Session | None, exc: McpRunError, *, sent: bool) -> Verdict:
        """How the attempt that raised ``exc`` ended (:func:`~runner.engine.calls.retry.classify`, as the local
        loop asks it); the link is told of a session that is gone."""
        if isinstance(exc, NotDelivered) and session is not None and not isinstance(exc, SessionExpired):
            server.link.lost(session, exc)  # (a session the server forgot was renewed by the session)
        if isinstance(exc, OutcomeUnknown):
            _lost(server.link, exc)
        safe = await self._safe_to_repeat() if wants_safety(exc) else False
        return classify(exc, sent=sent, safe=safe)

    async def _safe_to_repeat(self) -> bool:
        if self._safe is None:
            self._safe = await self._ask_safe()
        return self._safe

    async def _ask_safe(self) -> bool:
        ps = self._ps
        trusted = self._plan.servers[ps.server].server.trust_annotations
        if not reads_annotations(ps, trusted):
            return is_safe_to_repeat(ps, trusted, None)
        try:
            session = await self._sessions.server(self._spec, ps.server).link.session()
            tool = await self._sessions.checks.tool(ps.server, session, ps.tool)
        except McpRunError:
            return False
        return is_safe_to_repeat(ps, trusted, tool)


_STATUS: Final = {
    Verdict.RESEND: "retry",  # not delivered on every new session: the activity's next attempt calls it again
    Verdict.NOT_SENT: "retry",
    Verdict.REPEAT: "retry",  # outcome unknown, safe to repeat: the next attempt calls it again
    Verdict.IN_DOUBT: "in_doubt",
    Verdict.FAILED: "failed",
}


def _failed(exc: McpRunError, verdict: Verdict) -> dict[str, Any]:
    """The outcome of a call that raised ``exc`` and goes out no more in this attempt."""
    if isinstance(exc, InvalidCall):
        return {"status": "failed", "kind": FailureKind.INVALID_CALL.value, "error": first_line(exc)}
    kind = failure_kind(exc).value
    if verdict is Verdict.FAILED:
        return {"status": "failed", "kind": kind, "error": str(exc)}
    return {"status": _STATUS[verdict], "kind": kind, "error": first_line(exc)}


def _lost(link: ServerLink, exc: McpRunError) -> None:
    session = link.current()
    if session is not None and session.broken is not None:
        link.lost(session, exc)


async def ask_reconcile(
    sessions: Sessions, spec: RunSpec, step: str, asks: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The answers of step ``step``'s reconcile tool about items in doubt (``asks``: ``{"key", "args"}``, the
    reconcile call's arguments as the workflow rendered them), in order: ``{"key", "result"}`` (its
    ``tools/call`` result, masked) or ``{"key", "error"}``, with ``"throttled"``: the ``server_throttled``
    records the server's link heard meanwhile, journaled before the verdict. The verdict is the workflow's
    (:func:`runner.engine.core.reconcile.verdict`, as locally); asking is safe to repeat (``validate`` makes
    sure), so an attempt lost midway is simply asked again."""
    plan = sessions.plan(spec)
    ps = plan.steps[step]
    recon = ps.reconcile
    assert recon is not None
    masker = sessions.masker(spec)
    server = sessions.server(spec, ps.server)
    out: list[dict[str, Any]] = [{} for _ in asks]

    async def one(i: int) -> None:
        key, args = asks[i]["key"], masker.decode_value(asks[i]["args"])

        async def ask(session: Session) -> dict[str, Any]:
            async with server.limit:
                if not recon.idempotent and not await _annotated_safe(sessions, plan, ps, session, recon.tool):
                    return {
                        "key": key,
                        "error": f"the server does not annotate {recon.tool!r} as read-only or idempotent",
                    }
                answer = await session.call_tool(recon.tool, args, timeout=ps.timeout, idle_timeout=ps.idle_timeout)
            return {"key": key, "result": answer.raw}

        try:  # as locally: one not delivered is asked again on the next session, one refused for now after the pause
            out[i] = await until_delivered(server.link, server.link.session, ask)
        except McpRunError as exc:
            out[i] = {"key": key, "error": first_line(exc)}
        if server.heard:  # what the link heard that no refused call took (this ask's throttles): journaled with it
            out[i]["throttled"] = server.heard[:THROTTLES_KEPT]
            server.heard.clear()

    with masking(masker.mask):
        async with trio.open_nursery() as nursery:
            for i in range(len(asks)):
                nursery.start_soon(one, i)
    return [dict(masker.encode_value(answer)) for answer in out]


async def _annotated_safe(sessions: Sessions, plan: Plan, ps: PlannedStep, session: Session, tool: str) -> bool:
    """A trusted server annotates ``tool`` as read-only or idempotent (as the local engine asks)."""
    if not plan.servers[ps.server].server.trust_annotations:
        return False
    found = await sessions.checks.tool(ps.server, session, tool)
    return found is not None and (found.annotations.read_only or found.annotations.idempotent)
