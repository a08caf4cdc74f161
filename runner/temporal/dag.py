"""The DAG workflow: a run of a workflow file, on Temporal, deterministic.

It is built from the pure core and keeps its semantics: the :class:`~runner.workflow.plan.Plan` (rebuilt
from the text given), templates and their context, the step gate of :mod:`runner.engine.core.conditions`, the
readiness of :mod:`runner.engine.core.readiness`, and the run's :class:`~runner.engine.core.state.RunState`, folded
from the same typed events the local engine journals. How it ends is :func:`runner.engine.core.outcome.settle`
of that state: the same status, exit code, failures and items in doubt as a local run.

What is not the same: calls go out in activities of up to ``batch_size`` items of one step
(:mod:`runner.temporal.activities`), at most ``max_pending`` of them pending at once; a fan-out of more
than ``child_items`` calls runs as child workflows (:mod:`runner.temporal.fanout`) whose outcomes are
journaled here; ``env`` values never enter the history (templates see ``***env.NAME***``; the activity puts
the worker's values back).

Queries: ``events(since)`` (the events after ``since``, encoded as journal lines: progress views, ``export``)
and ``progress()`` (counts per step).

The workflow runs outside Temporal's sandbox (``sandboxed=False``): the core reads no clock, randomness or
environment, which is what the sandbox guards; its imports (pydantic, regex, jmespath) do not load in it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any, Final

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ChildWorkflowError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from runner.engine.calls.args import args_renderer
    from runner.engine.core.conditions import Skip
    from runner.engine.core.events import (
        JOURNAL_FORMAT,
        AnyEvent,
        BadEvent,
        DoubtDecided,
        Entry,
        ItemFailed,
        ItemReconciled,
        ItemSucceeded,
        ProgressNoted,
        RunFinished,
        RunResumed,
        RunStarted,
        RunStopped,
        ServerThrottled,
        decode,
        encode,
    )
    from runner.engine.core.items import ArgsFailed, ItemAction, awaiting_decision, rendered_args, settled_entry
    from runner.engine.core.outcome import settle
    from runner.engine.core.reconcile import left_in_doubt, reconcile_args, reconcile_context, verdict, verdict_entry
    from runner.engine.core.state import RunState
    from runner.engine.core.steps import Ended, Fail, StepMachine
    from runner.engine.core.vocabulary import Decision, FailureKind, RunStatus
    from runner.masking import escape_value, placeholders
    from runner.temporal.activities import RECONCILE_ACTIVITY
    from runner.temporal.fanout import (
        CALLS_BYTES,
        CHILD_WORKFLOW,
        MAX_CHILDREN,
        BatchOptions,
        child_arg,
        child_lost,
        execute_batch,
        slices,
    )
    from runner.temporal.lost import UNREACHABLE
    from runner.temporal.slices import by_reference, slice_of
    from runner.temporal.spec import (
        QUERY_LIMIT,
        WORKFLOW_NAME,
        RunSpec,
        batch_size_for,
        build_plan_of,
        encoded_inputs,
        env_placeholders,
    )
    from runner.workflow.context import item_entry
    from runner.workflow.plan import Plan, PlannedStep

__all__ = ["WORKFLOW_NAME", "DagWorkflow"]

RECONCILE: Final = "reconcile"  # the `decide` update with no decision: items in doubt are asked (resume with no flag)
RECONCILE_PATCH: Final = "reconcile-on-temporal"  # workflow.patched: histories of before it replay unchanged
RECONCILE_CACHE_PATCH: Final = "reconcile-then-cache"  # an item its reconcile tool says not done: its cache asked


@workflow.defn(name=WORKFLOW_NAME, sandboxed=False)
class DagWorkflow:
    def __init__(self) -> None:
        self._entries: list[dict[str, Any]] = []
        self._state = RunState(keep_results=set())
        self._steps: StepMachine | None = None  # the pass's views, step gate and step records (as a local run's)
        self._open = 0
        self._spec: RunSpec | None = None
        self._plan: Plan | None = None
        self._inputs: dict[str, Any] = {}
        self._env: dict[str, Any] = {}
        self._pending: asyncio.Semaphore | None = None
        self._waiting = False
        self._prior: str | None = None  # after a decision: "rerun" or "skip" (what a resume does with items in doubt)
        self._kept: dict[tuple[str, str], dict[str, Any] | None] = {}  # results of succeeded items templates read
        self._tasks: list[asyncio.Task[None]] = []
        self._running: dict[tuple[str, str], Any] = {}  # items in a pending activity -> the progress journaled
        self._pass = -1  # 0 for the first pass over the DAG, then one more after each decision (child ids)
        self._children: asyncio.Semaphore | None = None
        # calls whose server could not be reached (the activity's "unreachable"), by step, until the step ends
        self._unreached: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
        self._digests: dict[tuple[str, str], str] = {}  # the cache keys of calls in flight of steps with `cache:`

    # -- queries -------------------------------------------------------------------------------------

    @workflow.query
    def events(self, since: int) -> list[dict[str, Any]]:
        """The run's events after number ``since`` (at most 5,000 per answer), as journal objects."""
        start = max(0, since)
        return self._entries[start : start + QUERY_LIMIT]

    # -- the run ---------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: dict[str, Any]) -> dict[str, Any]:
        spec = self._spec = RunSpec.from_json(arg)
        plan = self._plan = build_plan_of(spec)
        self._inputs = encoded_inputs(plan)
        self._env = env_placeholders(spec)
        self._pending = asyncio.Semaphore(max(1, spec.max_pending))
        self._children = asyncio.Semaphore(MAX_CHILDREN)
        self._emit(
            RunStarted(
                run_id=spec.run_id,
                workflow=spec.workflow,
                workflow_hash=spec.workflow_hash or None,
                inputs=escape_value(spec.inputs),
                fingerprints=spec.fingerprints,
                env=sorted(name for name, is_set in spec.env.items() if is_set),
                journal=JOURNAL_FORMAT,
                traceparent=spec.traceparent,
            )
        )
        while True:
            outcome = await self._walk(plan)
            if outcome["status"] != RunStatus.IN_DOUBT.value:
                return outcome
            # Everything else is done: wait for a decision about the items in doubt (the `decide` update).
            self._waiting = True
            await workflow.wait_condition(lambda: self._prior is not None and not self._waiting)

    async def _walk(self, plan: Plan) -> dict[str, Any]:
        """One pass over the DAG (the first, or one after a decision): run it, settle, record the end."""
        assert self._spec is not None
        spec = self._spec
        self._pass += 1
        steps = self._steps = StepMachine(
            plan,
            self._state,
            lambda event: self._emit(event),
            inputs=self._inputs,
            env=self._env,
            resumed=self._prior is not None,
            cache=spec.cache_index(),
        )
        for sid in steps.first():
            self._start(sid)
        await workflow.wait_condition(lambda: self._open == 0)
        # Each output on its own, as a local run renders them: one that fails is named, the others kept.
        outputs, output_failures = plan.render_each_output(steps.context())
        outcome = settle(plan, self._state, outputs=outputs, output_failures=output_failures)
        counts = self._state.end_counts()
        code = int(outcome.exit_code)
        if outcome.status.closed:
            self._emit(RunFinished(status=outcome.status, exit_code=code, outputs=outputs, counts=counts))
        else:
            self._emit(RunStopped(status=outcome.status, exit_code=code, outputs=outputs, counts=counts))
        return {
            "run_id": spec.run_id,
            "status": outcome.status.value,
            "exit_code": code,
            "outputs": outputs,
            "output_failures": [dataclasses.asdict(failure) for failure in output_failures],
            "failures": outcome.failures,
            "in_doubt": outcome.in_doubt,
            "counts": counts,
            "events": len(self._entries),
        }

    # -- the decision about items in doubt ---------------------------------------------------------------

    @workflow.query
    def waiting(self) -> bool:
        """True while the run waits for a decision about its items in doubt."""
        return self._waiting

    @workflow.query
    def definition(self) -> dict[str, Any]:
        """The run's definition (its :class:`~runner.temporal.spec.RunSpec`)."""
        return self._spec.to_json() if self._spec is not None else {}

    @workflow.signal(name="progress")
    def progress(self, report: dict[str, Any]) -> None:
        """The latest progress of items of a pending activity (sent by the worker, throttled): journaled as
        ``progress`` events, so the run's view and ``export`` see it while the calls run."""
        items = report.get("items") if isinstance(report, dict) else None
        sid = report.get("step") if isinstance(report, dict) else None
        if not isinstance(items, dict) or not isinstance(sid, str) or self._plan is None or sid not in self._plan.steps:
            return
        for key, progress in items.items():
            self._progress(self._plan.steps[sid], key, progress, running=True)

    @workflow.update
    def decide(self, choice: str) -> int:
        """``rerun`` (call the items in doubt again), ``skip`` (record them as failed) or ``accept`` (record them as
        done), then run what is left, as a local resume does; returns the number of the first event of the new
        attempt."""
        assert self._spec is not None
        self._prior = choice
        self._waiting = False
        self._emit(RunResumed(pid=0, fingerprints=self._spec.fingerprints, allow_changed=False))
        first = len(self._entries)
        # As a local resume: the decision is journaled, one record per step naming the items it settles, before
        # anything acts on it; the fold applies it (an accepted item is then succeeded, a skipped one skipped).
        assert self._plan is not None
        if choice == RECONCILE:
            return first  # no decision: the pass asks each item's reconcile tool before it would call it
        for sid, keys in awaiting_decision(self._state, self._plan.steps).items():
            self._emit(DoubtDecided(step=sid, keys=keys, decision=Decision(choice)))
        return first

    @decide.validator
    def _check_decision(self, choice: str) -> None:
        if choice not in ("rerun", "skip", "accept", RECONCILE):
            raise ValueError(f"unknown decision {choice!r}: rerun, skip, accept or reconcile")
        if not self._waiting:
            raise ValueError("the run is not waiting for a decision about items in doubt")
        if choice == RECONCILE:
            assert self._plan is not None
            unasked = [
                sid for sid in awaiting_decision(self._state, self._plan.steps) if not self._plan.steps[sid].reconcile
            ]
            if unasked:
                raise ValueError(
                    f"items of step {unasked[0]!r} are in doubt and it has no reconcile: to ask; decide them: "
                    "--rerun-in-doubt, --skip-in-doubt or --accept-in-doubt"
                )

    def _emit(self, event: AnyEvent) -> None:
        seq = len(self._entries) + 1
        ts = workflow.now().strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        entry = Entry(seq, ts, event)
        self._state.apply(entry)
        self._entries.append(encode(entry))

    def _start(self, sid: str) -> None:
        self._open += 1
        self._tasks.append(asyncio.create_task(self._step_task(sid)))

    # -- steps (as the local scheduler runs them) ------------------------------------------------------

    async def _step_task(self, sid: str) -> None:
        assert self._plan is not None and self._steps is not None
        steps, ps = self._steps, self._plan.steps[sid]
        try:
            decision = steps.decide(ps)
            if isinstance(decision, Skip):
                steps.skip(ps, decision)
            elif isinstance(decision, Fail):
                steps.fail(ps, decision.error, decision.kind)
            else:
                await self._run_step(ps)
        finally:
            for dependent in steps.ended(sid):
                self._start(dependent)
            self._open -= 1

    async def _run_step(self, ps: PlannedStep) -> None:
        assert self._spec is not None and self._steps is not None
        steps = self._steps
        found = steps.items(ps, placeholders)
        if found is None:
            return
        items, keys = found
        steps.start(ps, items, keys)
        entries: list[dict[str, Any] | None] = [None] * len(items)
        calls, asks = self._calls(ps, items, keys, entries)
        settled: set[str] = set()
        if asks:  # in doubt, of a step with reconcile: (a resume): asked first; those not done are called now
            if workflow.patched(RECONCILE_PATCH):
                again = await self._reconcile(ps, items, asks, entries, settled, at_end=False)
                # "not done": called as a call never made is (a history of before it: called with no lookup)
                if again and workflow.patched(RECONCILE_CACHE_PATCH):
                    again = [call for call in again if self._to_call(ps, items[call["at"]], call, entries)]
            else:  # replaying a history of before reconcile: on Temporal: a decided item was called again
                again = asks
            calls = sorted(calls + again, key=lambda c: int(c["at"]))
        server = self._plan.servers.get(ps.server) if self._plan is not None else None
        size = batch_size_for(self._spec, len(calls), server.server.max_concurrency if server is not None else 1)
        if ps.fan_out and len(calls) > self._spec.child_items:
            by_ref = by_reference(ps)  # then a child gets index ranges, not the calls (runner.temporal.slices)
            parts = slices(calls, self._spec.child_items, None if by_ref else CALLS_BYTES)
            await asyncio.gather(*(self._child(ps, number, part, entries, size) for number, part in enumerate(parts)))
        else:
            batches = slices(calls, size)
            await asyncio.gather(*(self._batch(ps, batch, entries) for batch in batches))
        unreached = self._unreached.pop(ps.id, [])
        if unreached and len(unreached) == len(calls):
            # No call reached the server: the step fails before it runs, as a local step does (incomplete).
            steps.fail(ps, str(unreached[0][1].get("error") or ""), FailureKind.NOT_SENT)
            return
        for call, outcome in unreached:
            entries[call["at"]] = self._apply(ps, call, {**outcome, "status": "failed"})
        # The items its calls left in doubt, asked now (only "done" acted on); not when replaying a history of
        # before reconcile: on Temporal, which made no reconcile activity here (a replay must do what it did).
        if ps.reconcile is not None and workflow.patched(RECONCILE_PATCH):
            left = set(left_in_doubt(self._state.step(ps.id), [c["key"] for c in calls], settled))
            if left:
                await self._reconcile(ps, items, [c for c in calls if c["key"] in left], entries, settled, at_end=True)
        steps.finish(ps, items, keys, entries if ps.referenced else [])

    async def _reconcile(
        self,
        ps: PlannedStep,
        items: list[Any],
        asks: list[dict[str, Any]],
        entries: list[dict[str, Any] | None],
        settled: set[str],
        *,
        at_end: bool,
    ) -> list[dict[str, Any]]:
        """Ask the step's reconcile tool about the items in doubt of ``asks`` (their calls), in a reconcile
        activity, and journal each verdict (:func:`~runner.engine.core.reconcile.verdict`, as locally; the
        activity's answer is in the history before anything acts on it). Returns the calls not done (to make
        now); the entries of the others are set, and their keys added to ``settled``. ``at_end``: asked at
        the end of the step whose calls left them in doubt ("not done" is not acted on)."""
        assert self._spec is not None and self._steps is not None and self._pending is not None
        spec = ps.reconcile
        assert spec is not None
        contexts: dict[str, dict[str, Any]] = {}
        requests: list[dict[str, Any]] = []
        answers: dict[str, dict[str, Any]] = {}
        for call in asks:
            key = call["key"]
            context = contexts[key] = reconcile_context(
                self._steps.context(items[call["at"]], call["index"]), key, call["args"]
            )
            args = reconcile_args(spec, context)
            if isinstance(args, ArgsFailed):
                answers[key] = {"error": args.error}
            else:
                requests.append({"key": key, "args": args})
        for part in slices(requests, self._spec.batch_size):
            for answer in await self._ask(ps, part):
                answers[str(answer.get("key"))] = answer
        again: list[dict[str, Any]] = []
        for call in asks:
            key = call["key"]
            record = self._verdict(ps, call, contexts[key], answers.get(key) or {"error": "no answer"}, at_end=at_end)
            done, entry = verdict_entry(record, referenced=ps.referenced)
            if not done:
                again.append(call)
                continue
            settled.add(key)
            entries[call["at"]] = entry
            if entry is not None and record.result is not None:
                self._kept[(ps.id, key)] = entry
        return again

    def _verdict(
        self, ps: PlannedStep, call: dict[str, Any], context: dict[str, Any], answer: dict[str, Any], *, at_end: bool
    ) -> ItemReconciled:
        """Journal the verdict on one answer of the reconcile activity (:func:`~runner.engine.core.reconcile.verdict`,
        as locally), after the throttles the ask met (as an item's before its end)."""
        spec = ps.reconcile
        assert spec is not None
        self._throttled(answer.get("throttled"))
        result = answer.get("result") if isinstance(answer.get("result"), dict) else None
        error = answer.get("error")
        record = verdict(
            spec,
            context,
            step=ps.id,
            key=call["key"],
            index=call["index"],
            result=result,
            error=str(error) if error is not None else None,
            at_end=at_end,
        )
        self._emit(record)
        return record

    async def _ask(self, ps: PlannedStep, part: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One reconcile activity (at most ``max_pending`` activities at once); every answer an error when it
        failed on every attempt."""
        assert self._spec is not None and self._pending is not None
        info = workflow.info()
        request = {
            "plan_key": self._spec.plan_key,
            "run": info.workflow_id,
            "run_id": info.run_id,
            "step": ps.id,
            "items": part,
        }
        async with self._pending:
            try:
                answers: list[dict[str, Any]] = await workflow.execute_activity(
                    RECONCILE_ACTIVITY,
                    request,
                    start_to_close_timeout=timedelta(hours=1),
                    heartbeat_timeout=timedelta(seconds=self._spec.heartbeat_timeout),
                    retry_policy=RetryPolicy(
                        initial_interval=timedelta(seconds=1),
                        maximum_interval=timedelta(seconds=30),
                        maximum_attempts=self._spec.max_attempts,
                    ),
                    result_type=list,
                )
            except ActivityError as exc:
                error = f"the reconcile activity failed on every attempt: {exc.cause or exc}"
                return [{"key": ask["key"], "error": error} for ask in part]
        return answers

    def _calls(
        self, ps: PlannedStep, items: list[Any], keys: list[str], entries: list[dict[str, Any] | None]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The step's calls (``{"key", "index", "args", "at"}``) and those of its items in doubt to ask its
        reconcile tool about first (``RECONCILE``); the entries of items settled without one."""
        assert self._steps is not None
        render = args_renderer(ps, self._steps.context)
        calls: list[dict[str, Any]] = []
        asks: list[dict[str, Any]] = []
        for at, item in enumerate(items):
            where, key = at if ps.fan_out else None, keys[at]
            action = self._steps.action(ps.id, key)
            if not action.calls and action is not ItemAction.RECONCILE:
                entries[at] = self._settled(ps, key, action)
                continue
            args = rendered_args(render, item, where)
            if isinstance(args, ArgsFailed):
                if action is ItemAction.RECONCILE:  # it may have run: it stays in doubt, nothing recorded
                    entries[at] = item_entry("failed", args.error)
                    continue
                entries[at] = item_entry("failed", self._failed(ps, where, key, "template-error", args.error))
                continue
            if action is ItemAction.RECONCILE:
                asks.append({"key": key, "index": where, "args": args, "at": at})
                continue
            call = {"key": key, "index": where, "args": args, "at": at}
            if self._to_call(ps, item, call, entries):
                calls.append(call)
        return calls, asks

    def _to_call(self, ps: PlannedStep, item: Any, call: dict[str, Any], entries: list[dict[str, Any] | None]) -> bool:
        """Whether ``call`` (of ``item``) is made: :meth:`~runner.engine.core.steps.StepMachine.call_or_reuse`,
        as locally (a step's cache is asked first); the entry of one that is not (reused, or failed) is set."""
        assert self._steps is not None
        key, at = call["key"], call["at"]
        before = self._steps.call_or_reuse(ps, call["index"], key, item, call["args"])
        if isinstance(before, Ended):
            entries[at] = before.entry
            if before.reused and before.entry is not None:
                self._kept[(ps.id, key)] = before.entry
            return False
        if before.digest is not None:
            self._digests[(ps.id, key)] = before.digest  # journaled with its result (a later run's cache)
        return True

    def _settled(self, ps: PlannedStep, key: str, action: ItemAction) -> dict[str, Any] | None:
        """The entry of an item settled without a call (:mod:`runner.engine.core.items`): a success reused (one
        accepted in doubt has no result), or one an earlier decision skipped."""
        if action is ItemAction.REUSE:
            return (self._kept.get((ps.id, key)) or item_entry("succeeded")) if ps.referenced else None
        return settled_entry(self._state.item(ps.id, key))  # SETTLED (COLLECT: no task is followed here)

    async def _batch(self, ps: PlannedStep, batch: list[dict[str, Any]], entries: list[dict[str, Any] | None]) -> None:
        assert self._spec is not None and self._pending is not None
        self._running.update(((ps.id, c["key"]), None) for c in batch)
        run, run_id = workflow.info().workflow_id, workflow.info().run_id
        options = BatchOptions.of(self._spec)
        if by_reference(ps):  # the activity renders the calls from the definition (runner.temporal.slices)
            outcomes = await execute_batch(options, ps.id, self._pending, run, parent_run=run_id, piece=slice_of(batch))
        else:
            outcomes = await execute_batch(options, ps.id, self._pending, run, parent_run=run_id, calls=batch)
        if [o.get("key") for o in outcomes] != [c["key"] for c in batch]:  # never: it renders as the run does
            outcomes = child_lost(batch, RuntimeError("its outcomes do not match its calls"))
        for call, outcome in zip(batch, outcomes, strict=True):
            entries[call["at"]] = self._apply(ps, call, outcome)

    async def _child(
        self, ps: PlannedStep, number: int, part: list[dict[str, Any]], entries: list[dict[str, Any] | None], size: int
    ) -> None:
        """A slice of a large fan-out, as a child workflow (batches of ``size`` items): its outcomes are journaled
        here, as the run's own."""
        assert self._spec is not None and self._children is not None
        run = workflow.info().workflow_id
        arg = child_arg(self._spec, ps, part, run, workflow.info().run_id, batch_size=size)
        self._running.update(((ps.id, c["key"]), None) for c in part)
        async with self._children:
            try:
                outcomes: list[dict[str, Any]] = await workflow.execute_child_workflow(
                    CHILD_WORKFLOW,
                    arg,
                    id=f"{run}/{self._spec.run_id}/{ps.id}/{self._pass}/{number}",  # the run's own: one id per file
                    result_type=list,
                    parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                )
            except ChildWorkflowError as exc:
                outcomes = child_lost(part, exc)
        if [o.get("key") for o in outcomes] != [c["key"] for c in part]:  # never: the child renders as the run does
            outcomes = child_lost(part, RuntimeError("its outcomes do not match its calls"))
        for call, outcome in zip(part, outcomes, strict=True):
            entries[call["at"]] = self._apply(ps, call, outcome)

    def _apply(self, ps: PlannedStep, call: dict[str, Any], outcome: dict[str, Any]) -> dict[str, Any] | None:
        key, index = call["key"], call["index"]
        self._throttled(outcome.get("throttled"))
        self._progress(ps, key, outcome.get("progress"))
        status = outcome.get("status")
        result = outcome.get("result")
        if status == UNREACHABLE:
            self._unreached.setdefault(ps.id, []).append((call, outcome))
            return None  # journaled by _run_step, once the step's calls have all ended
        if status == "succeeded":
            digest = self._digests.pop((ps.id, key), None)
            self._emit(ItemSucceeded(step=ps.id, item=key, index=index, result=result or {}, cache=digest))
            entry = item_entry("succeeded", None, result) if ps.referenced else None
            if entry is not None:
                self._kept[(ps.id, key)] = entry
            return entry
        kind = str(outcome.get("kind") or FailureKind.OUTCOME_UNKNOWN.value)
        error = str(outcome.get("error") or "")
        self._failed(ps, index, key, kind, error, result)
        return item_entry("failed", error, result)

    def _throttled(self, records: Any) -> None:
        """The throttles an item's calls met (``server_throttled`` records, as the worker's link heard them,
        :func:`~runner.engine.calls.servers.throttled_event`): journaled before the item's end. No command
        comes of them, so histories of before replay unchanged (an outcome without them journals none)."""
        for record in records if isinstance(records, list) else ():
            try:
                event = decode({**record, "seq": 1, "ts": ""}).event  # checked as a journal line is
            except (BadEvent, TypeError):
                continue  # only ever written by the worker: not expected
            if isinstance(event, ServerThrottled):
                self._emit(event)

    def _progress(self, ps: PlannedStep, key: str, progress: Any, *, running: bool = False) -> None:
        """The item's latest progress notification, as the worker returned it or signalled it while the item
        runs (``running``); none, or the one already journaled: nothing."""
        shown = self._running.get((ps.id, key)) if running else self._running.pop((ps.id, key), None)
        if running and (ps.id, key) not in self._running:
            return  # ended already, or not in a pending activity: a late report
        if not isinstance(progress, dict) or not isinstance(progress.get("progress"), int | float):
            return
        if progress == shown:
            return
        if running:
            self._running[(ps.id, key)] = progress
        total, message = progress.get("total"), progress.get("message")
        self._emit(
            ProgressNoted(
                step=ps.id,
                item=key,
                progress=float(progress["progress"]),
                total=float(total) if isinstance(total, int | float) else None,
                message=message if isinstance(message, str) else None,
            )
        )

    def _failed(self, ps: PlannedStep, index: int | None, key: str, kind: str, error: str, result: Any = None) -> str:
        self._emit(ItemFailed(step=ps.id, item=key, index=index, kind=FailureKind(kind), error=error, result=result))
        return error
