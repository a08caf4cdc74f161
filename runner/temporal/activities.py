"""The call activity (asyncio side): a batch of items of one step, run in the worker's trio thread.

Its heartbeats are the dispatch markers (:mod:`runner.temporal.markers`): each one an awaited
``RecordActivityTaskHeartbeat`` through the worker's client, never the SDK's throttled background heartbeat
alone (whose late send of older details could overwrite newer ones). The keeper beats every third of the
heartbeat timeout whatever the calls do, to the server and to the worker's core (which otherwise cancels an
activity that has not heartbeated through it for the heartbeat timeout and 5 s: a slow batch on a live worker),
so a dead worker is told from a slow one.

How an attempt ends: with every item's outcome; or, when some items were surely not run (their server
could not be reached) or ran with an unknown outcome but are safe to repeat, with a *retryable* failure after
their ends are recorded, so the next attempt calls only those again (the last attempt returns them as
failed, not sent, or in doubt). Tool, protocol and in-doubt outcomes are definite: never retried by Temporal.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.client import WorkflowHandle
from temporalio.exceptions import ApplicationError

from runner.masking import escape_value
from runner.temporal.batch import Batch, Sessions, ask_reconcile
from runner.temporal.bridge import TrioThread
from runner.temporal.lost import own_outcomes, settled
from runner.temporal.markers import Markers
from runner.temporal.progress import ProgressBoard
from runner.temporal.slices import render_slice, unrendered
from runner.temporal.spec import RunSpec
from runner.workflow.template import TemplateError

if TYPE_CHECKING:
    from runner.engine.telemetry.otel import Tracing

__all__ = [
    "CALL_ACTIVITY",
    "CORE_THROTTLE",
    "NOT_SENT_RETRY",
    "RECONCILE_ACTIVITY",
    "SLICE_KEYS_ACTIVITY",
    "SPECS_KEPT",
    "CallActivities",
    "keeper_interval",
]

CALL_ACTIVITY = "mcp-run.call-batch"
SLICE_KEYS_ACTIVITY = "mcp-run.slice-keys"
RECONCILE_ACTIVITY = "mcp-run.reconcile"
SPECS_KEPT = 32  # runs whose definitions a worker keeps (asked again of the run when dropped)
CORE_THROTTLE = timedelta(milliseconds=100)  # the worker's max_heartbeat_throttle_interval: under the keeper's
# interval (0.2 s at least), so the core sends each beat as it is handed over, never a held one later
NOT_SENT_RETRY = "McpRunNotSentYet"  # the retryable error type: some items of the batch are to be called again
NOTHING_SENT: dict[str, Any] = {"dispatched": [], "ended": {}}  # markers (heartbeat details) of no dispatch at all


@dataclass
class CallActivities:
    """The activities of one worker process, bound to its trio thread and the sessions it holds; ``tracing``:
    each item called is a span of the run's trace, which Temporal's tracing interceptor brings to the activity
    (:mod:`runner.temporal.tracing`)."""

    thread: TrioThread
    sessions: Sessions
    specs: dict[str, RunSpec] = field(default_factory=dict)
    tracing: Tracing | None = None
    asking: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)  # definitions being asked

    @activity.defn(name=CALL_ACTIVITY)
    async def call_batch(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """The batch's outcomes, in order. The batch is the request's ``items`` (``{"key", "index", "args"}``), or
        its ``slice`` of the step's items (:mod:`runner.temporal.slices`), rendered here from the definition."""
        spec = await self._spec(request, activity.info())
        if "slice" not in request:
            return await self._call(request, spec, request["items"])
        calls = self._render(spec, request)
        called = iter(await self._call(request, spec, [c for c in calls if "error" not in c]))
        return [unrendered(c) if "error" in c else next(called) for c in calls]

    @activity.defn(name=SLICE_KEYS_ACTIVITY)
    async def slice_keys(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """The calls of a slice without their arguments (``{"key", "index"}``): what a child workflow needs to
        settle a batch whose activity failed on every attempt."""
        spec = await self._spec(request, activity.info())
        return [{"key": c["key"], "index": c["index"]} for c in self._render(spec, request)]

    @activity.defn(name=RECONCILE_ACTIVITY)
    async def reconcile(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """The step's reconcile tool asked about the request's ``items`` (``{"key", "args"}``): each answer, in
        order (:func:`~runner.temporal.batch.ask_reconcile`). It heartbeats while it asks (a lost worker is
        noticed; the workflow asks again: asking is safe to repeat)."""
        spec = await self._spec(request, activity.info())

        async def beat() -> None:
            while True:
                await asyncio.sleep(keeper_interval(spec.heartbeat_timeout))
                activity.heartbeat()

        beating = asyncio.ensure_future(beat())
        try:
            return await self.thread.run(ask_reconcile, self.sessions, spec, request["step"], request["items"])
        finally:
            beating.cancel()

    def _render(self, spec: RunSpec, request: dict[str, Any]) -> list[dict[str, Any]]:
        try:
            return render_slice(spec, self.sessions.plan(spec), request["step"], request["slice"])
        except TemplateError as exc:  # the run's workflow rendered these items: not expected
            raise ApplicationError(f"the slice does not render here: {exc}", non_retryable=True) from None

    async def _call(self, request: dict[str, Any], spec: RunSpec, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        info = activity.info()
        step: str = request["step"]
        loop = asyncio.get_running_loop()
        handle = activity.client().get_async_activity_handle(task_token=info.task_token)
        prior = info.heartbeat_details[0] if info.heartbeat_details else None
        final = info.attempt >= spec.max_attempts
        run = _run_of(request, info)
        traced = None
        if self.tracing is not None:
            from runner.engine.telemetry.otel import active_trace_id

            trace_id = active_trace_id()  # (the run's, from the activity's headers: none when it is not traced)
            traced = (self.tracing, trace_id) if trace_id is not None else None

        async def record(details: dict[str, Any]) -> None:
            await self.thread.to_asyncio(loop, lambda: handle.heartbeat(details))

        context = contextvars.copy_context()  # the activity's: the SDK's heartbeat finds its activity there

        def alive(details: dict[str, Any]) -> None:
            """The keeper's beat, to the worker's core (from the trio thread; sent by the core, not awaited)."""
            with contextlib.suppress(RuntimeError):  # the loop is closing: the worker is going away
                loop.call_soon_threadsafe(activity.heartbeat, details, context=context)

        async def report(markers: Markers) -> None:
            """Progress only: a heartbeat (unless one is in flight), then the workflow is told (best effort)."""
            fresh = markers.progress.fresh()
            await markers.nudge()
            if fresh:
                # Masked text, encoded for the run's journal as the outcome is (a *** in it is text, never a
                # placeholder that a read could turn into a value).
                encoded = escape_value(fresh)
                await self.thread.to_asyncio(loop, lambda: _signal_progress(run, step, encoded))

        held: list[Markers] = []

        async def attempt() -> list[dict[str, Any]]:
            import trio

            board = ProgressBoard(self.sessions.masker(spec))  # messages masked before they reach the history
            markers = Markers(record, prior, board, alive=alive)
            held.append(markers)
            batch = Batch(self.sessions, spec, step, items, markers, traced=traced)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(markers.keep_alive, keeper_interval(spec.heartbeat_timeout))
                nursery.start_soon(markers.progress.pump, lambda: report(markers))
                outcomes = await batch.run()
                nursery.cancel_scope.cancel()
            return outcomes

        try:
            outcomes = await self.thread.run(attempt)
        except Exception as exc:  # unexpected: a bug, a heartbeat refused... (cancellation is not caught)
            if held:
                return await self._lost_attempt(items, held[0], exc, spec, final=final, details=held[0].details())
            # Never begun (the trio thread is gone): this attempt sent nothing; earlier ones, what their last
            # recorded heartbeat says (none recorded: none sent, a request goes out only after its mark is).
            return await self._lost_attempt(items, None, exc, spec, final=final, details=prior or NOTHING_SENT)
        again = [o for o in outcomes if o.get("status") == "retry"]
        if again and not final:
            raise ApplicationError(
                f"{len(again)} of {len(outcomes)} items to be called again: {again[0].get('error')}",
                type=NOT_SENT_RETRY,
            )
        return [settled(o) for o in outcomes]

    async def _lost_attempt(
        self,
        items: list[dict[str, Any]],
        markers: Markers | None,
        exc: Exception,
        spec: RunSpec,
        *,
        final: bool,
        details: Any,
    ) -> list[dict[str, Any]]:
        """An attempt ended by an unexpected exception. Not the last: the ends it knows are recorded (best
        effort) so the next attempt reuses them, and the exception goes to Temporal, which retries. The last
        (or a non-retryable exception): Temporal would give the workflow no heartbeat details, so the activity
        settles its items itself from ``details`` (:func:`~runner.temporal.lost.own_outcomes`): its markers', or
        the earlier attempts' when this one never began (``markers`` None)."""
        if not final and not (isinstance(exc, ApplicationError) and exc.non_retryable):
            if markers is not None:
                with contextlib.suppress(Exception):
                    await self.thread.run(markers.flush)
            raise exc
        masker = self.sessions.masker(spec)
        outcomes: list[dict[str, Any]] = masker.encode_value(own_outcomes(items, details, exc))
        activity.logger.warning("the last attempt of a call batch failed; its items are settled from its markers")
        return outcomes

    async def _spec(self, request: dict[str, Any], info: activity.Info) -> RunSpec:
        """The run's definition: the workflow is asked for it once per worker and run (the item list may be
        large: it travels once, not with each activity). Cached per run, not per plan: two runs of one text
        may differ in what renders their calls (``env``)."""
        run = _run_of(request, info)
        key = f"{request['plan_key']}/{run.id}/{run.run_id}"
        spec = self.specs.pop(key, None)
        if spec is None:
            # The batches of a run start together: one query answers all of them (each is a workflow task).
            asking = self.asking.get(key)
            if asking is None:
                asking = self.asking[key] = asyncio.ensure_future(_definition(run, info))
                asking.add_done_callback(lambda _: self.asking.pop(key, None))
            spec = RunSpec.from_json(await asyncio.shield(asking))
        self.specs[key] = spec  # the newest last: a long-lived worker keeps the last SPECS_KEPT runs' definitions
        while len(self.specs) > SPECS_KEPT:
            del self.specs[next(iter(self.specs))]
        return spec


def keeper_interval(heartbeat_timeout: float) -> float:
    """Seconds between two beats of the keeper: a third of the heartbeat timeout (so two may be lost or late
    before the server gives up on the worker), never under 0.2 s."""
    return max(heartbeat_timeout / 3, 0.2)


def _run_of(request: dict[str, Any], info: activity.Info) -> WorkflowHandle[Any, Any]:
    """The run's workflow, pinned to its Temporal run (every run of a file has the same workflow id): the one
    named in the request (``run``, ``run_id``: the activity of a child workflow, or of the run itself), else
    the caller."""
    run = request.get("run")
    if isinstance(run, str) and run:
        run_id = request.get("run_id")
        return activity.client().get_workflow_handle(run, run_id=run_id if isinstance(run_id, str) else None)
    return activity.client().get_workflow_handle(info.workflow_id or "", run_id=info.workflow_run_id)


async def _definition(handle: WorkflowHandle[Any, Any], info: activity.Info) -> dict[str, Any]:
    if info.workflow_id is None:
        raise ApplicationError("the call activity runs only inside an mcp-run workflow", non_retryable=True)
    definition: dict[str, Any] = await handle.query("definition")
    return definition


async def _signal_progress(run: WorkflowHandle[Any, Any], step: str, items: dict[str, Any]) -> None:
    """Tell the workflow the latest progress of running items (a signal; lost when the run has ended)."""
    with contextlib.suppress(Exception):  # progress is best effort: never fails the batch
        await run.signal("progress", {"step": step, "items": items})
