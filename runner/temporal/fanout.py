"""Large fan-outs on Temporal: child workflows of at most ``child_items`` calls each.

One workflow's history holds at most 51,200 events and each payload at most 2 MB, so a fan-out of more than
``RunSpec.child_items`` calls (about 2,000) does not run in its run's workflow: the run starts child
workflows (:class:`FanOutWorkflow`), each with a contiguous slice of the calls. A child runs its calls in
batch activities, exactly as the run's workflow runs a small fan-out (the same activity, the same dispatch
markers, at most ``max_pending`` activities pending at once), and returns each call's outcome: its status,
its error, and its result only when the step is ``referenced`` (the activity leaves it out otherwise). The
run's workflow journals those outcomes as its own: items in doubt in a child are in doubt in the run, and the
decision about them is taken in the run (its ``decide`` Update), which calls them again in new children.

What a child is given (:func:`child_arg`):

- when the step's ``for_each``, ``key`` and ``args`` read nothing but ``inputs``, ``env``, ``item`` and
  ``index``: a *reference*, its slice (``start``, ``stop``, the indices not to call;
  :mod:`runner.temporal.slices`). It cuts it into smaller slices, one per batch activity, and each activity
  renders its calls from the run's definition (which each worker asks the run for once). The items, their
  keys and arguments then travel through no history but the run's argument; the outcomes carry the keys;
- else (the items or arguments read earlier steps' results) the slice's calls, as the run rendered them.

The run's own batch activities (a fan-out up to ``child_items`` calls) are given slices the same way.

A child's id is the run's workflow id, its run id, the step, the pass (0, then one per decision) and the slice
number: deterministic, so a replay finds the same children, and the run's own (every run of a file has the same
workflow id: a child of a closed run still open, its cancel not yet processed, does not block the next run's).
Cancelling the run cancels them (their activities too).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any, Final

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from runner.engine.core.vocabulary import FailureKind
    from runner.temporal.activities import CALL_ACTIVITY, SLICE_KEYS_ACTIVITY
    from runner.temporal.lost import lost_outcomes
    from runner.temporal.slices import by_reference, index_batches, slice_of
    from runner.temporal.spec import BATCH_SIZE, RunSpec
    from runner.workflow.plan import PlannedStep

__all__ = [
    "CALLS_BYTES",
    "CHILD_LOST",
    "CHILD_WORKFLOW",
    "MAX_CHILDREN",
    "BatchOptions",
    "FanOutWorkflow",
    "child_arg",
    "child_lost",
    "execute_batch",
    "slices",
]

CHILD_WORKFLOW: Final = "mcp-run.fan-out"
MAX_CHILDREN: Final = 10  # child workflows running at once per run (each with up to max_pending activities)
CALLS_BYTES: Final = 1_000_000  # arguments per payload of rendered calls (Temporal refuses payloads over 2 MB)
CHILD_LOST: Final = "its child workflow or activity failed ({error}); it may have been sent"


@dataclass(frozen=True)
class BatchOptions:
    """What running a batch activity needs of the run's definition (a child given its calls gets only this)."""

    plan_key: str
    batch_size: int
    max_pending: int
    heartbeat_timeout: float
    max_attempts: int

    @classmethod
    def of(cls, spec: RunSpec, batch_size: int | None = None) -> BatchOptions:
        """``batch_size``: the step's (:func:`~runner.temporal.spec.batch_size_for`), else the run's."""
        size = batch_size if batch_size is not None else spec.batch_size
        return cls(spec.plan_key, size, spec.max_pending, spec.heartbeat_timeout, spec.max_attempts)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def slices(calls: list[dict[str, Any]], size: int, max_bytes: int | None = CALLS_BYTES) -> list[list[dict[str, Any]]]:
    """``calls`` (in item order) cut into slices of at most ``size`` calls (one batch activity, or one child
    workflow, each), and, unless ``max_bytes`` is None, of at most ``max_bytes`` of arguments (as JSON; a call
    larger than that goes alone): what travels in one payload stays under Temporal's 2 MB."""
    size = max(1, size)
    out: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    weight = 0
    for call in calls:
        cost = len(json.dumps(call.get("args"), separators=(",", ":"), default=str)) if max_bytes is not None else 0
        if current and (len(current) == size or (max_bytes is not None and weight + cost > max_bytes)):
            out.append(current)
            current, weight = [], 0
        current.append(call)
        weight += cost
    if current:
        out.append(current)
    return out


def child_arg(
    spec: RunSpec,
    ps: PlannedStep,
    part: list[dict[str, Any]],
    parent: str,
    parent_run: str,
    *,
    batch_size: int | None = None,
) -> dict[str, Any]:
    """What the child running ``part`` (calls ``{"key", "index", "args", "at"}``, in item order) is given: a
    reference to its slice when the step allows it, else the calls. ``parent``, ``parent_run``: the run's
    workflow id and Temporal run id (every run of a file has that workflow id: the run id pins this one)."""
    options = BatchOptions.of(spec, batch_size).to_json()
    base: dict[str, Any] = {"step": ps.id, "parent": parent, "parent_run": parent_run, "options": options}
    if by_reference(ps):
        return {**base, "slice": slice_of(part)}
    return {**base, "calls": [{"key": c["key"], "index": c["index"], "args": c["args"]} for c in part]}


async def execute_batch(
    options: BatchOptions,
    step: str,
    pending: asyncio.Semaphore,
    parent: str,
    *,
    parent_run: str | None = None,
    calls: list[dict[str, Any]] | None = None,
    piece: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One call activity for ``calls``, or for slice ``piece`` (at most ``pending`` at once): each call's
    outcome, in order; when the activity failed on every attempt, what its last heartbeat says
    (:func:`~runner.temporal.lost.lost_outcomes`). ``parent``, ``parent_run``: the run's workflow (None: a
    child started before its parent named its run, which the activity then reads unpinned)."""
    request: dict[str, Any] = {
        "plan_key": options.plan_key,  # the activity asks the run's workflow for the definition once per worker
        "run": parent,  # the run's workflow: asked for the definition, told the progress
        "step": step,
    }
    if parent_run is not None:
        request["run_id"] = parent_run  # that run, not a later run of the same file (the same workflow id)
    if calls is not None:
        request["items"] = [{"key": c["key"], "index": c["index"], "args": c["args"]} for c in calls]
    else:
        request["slice"] = piece
    async with pending:
        try:
            outcomes: list[dict[str, Any]] = await workflow.execute_activity(
                CALL_ACTIVITY,
                request,
                start_to_close_timeout=timedelta(hours=24),
                heartbeat_timeout=timedelta(seconds=options.heartbeat_timeout),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    maximum_interval=timedelta(seconds=30),
                    maximum_attempts=options.max_attempts,
                ),
                result_type=list,
            )
        except ActivityError as exc:
            if calls is None:  # the keys of the slice, to read the last heartbeat's markers by
                calls = await workflow.execute_activity(
                    SLICE_KEYS_ACTIVITY,
                    request,
                    start_to_close_timeout=timedelta(minutes=5),
                    retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30), maximum_attempts=20),
                    result_type=list,
                )
            outcomes = lost_outcomes(exc, calls)
    return outcomes


def child_lost(part: list[dict[str, Any]], error: BaseException) -> list[dict[str, Any]]:
    """A child that failed as a whole (not its activities: they settle their items): every call of its slice
    in doubt (it gives no markers back; some may have been sent)."""
    reason = str(error.__cause__ or error) or type(error).__name__
    kind = FailureKind.OUTCOME_UNKNOWN.value
    text = CHILD_LOST.format(error=reason)
    return [{"key": c["key"], "index": c["index"], "status": "in_doubt", "kind": kind, "error": text} for c in part]


@workflow.defn(name=CHILD_WORKFLOW, sandboxed=False)
class FanOutWorkflow:
    """A slice of a large fan-out (see the module docstring); returns each call's outcome, in item order."""

    @workflow.run
    async def run(self, arg: dict[str, Any]) -> list[dict[str, Any]]:
        step: str = arg["step"]
        parent: str = arg["parent"]
        parent_run: str | None = arg.get("parent_run")
        options = BatchOptions(**arg["options"])
        if options.batch_size < 1:  # (a parent gives its step's size; never 0, the run's "sized by the fan-out")
            options = dataclasses.replace(options, batch_size=BATCH_SIZE)
        pending = asyncio.Semaphore(max(1, options.max_pending))
        if "slice" in arg:
            pieces = index_batches(arg["slice"], options.batch_size)
            done = await asyncio.gather(
                *(execute_batch(options, step, pending, parent, parent_run=parent_run, piece=p) for p in pieces)
            )
        else:
            batches = slices(arg["calls"], options.batch_size)
            done = await asyncio.gather(
                *(execute_batch(options, step, pending, parent, parent_run=parent_run, calls=b) for b in batches)
            )
        return [outcome for outcomes in done for outcome in outcomes]
