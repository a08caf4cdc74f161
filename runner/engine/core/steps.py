"""The step machine both executors share (the local trio scheduler and the Temporal workflow), so the two
cannot drift: whether a step whose dependencies have all ended runs, is skipped, or fails before it starts
(:func:`decide_step`); how a step that ran ended, from its items (:func:`step_outcome`); the status of a step
that fails before it runs (:func:`failed_status`); and :class:`StepMachine`, which keeps the views templates
read and the rule that a failure stops new steps, and records each step's start and end through the
executor's ``emit``. What to do with each item is :mod:`runner.engine.core.items`'s.

Pure (no trio, no asyncio): :func:`decide_step` asks the :class:`~runner.engine.core.conditions.Gate` (how
the dependencies ended, an interrupt, a failure elsewhere), then evaluates the step's ``if:`` inside
:func:`~runner.workflow.status.status_scope`. The ``if:`` is evaluated only when the gate lets the step
through; ``context`` is called only then.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from runner.engine.core.cache import CacheIndex, CacheLookup, cache_digest
from runner.engine.core.conditions import Gate, Skip
from runner.engine.core.events import AnyEvent, ItemFailed, ItemSucceeded, StepFinished, StepSkipped, StepStarted
from runner.engine.core.items import ItemAction, item_action, step_keys
from runner.engine.core.readiness import Readiness
from runner.engine.core.state import ItemState, RunState, StepState
from runner.engine.core.vocabulary import FailureKind, ItemStatus, StepStatus
from runner.workflow.context import fanout_view, identified, item_entry, make_context, step_view
from runner.workflow.plan import Plan, PlannedStep
from runner.workflow.status import status_scope
from runner.workflow.template import TemplateError

__all__ = [
    "RUN",
    "Call",
    "Ended",
    "Fail",
    "Run",
    "StepDecision",
    "StepMachine",
    "decide_step",
    "failed_status",
    "step_outcome",
    "view_status",
]


@dataclass(frozen=True, slots=True)
class Run:
    """The step runs."""


@dataclass(frozen=True, slots=True)
class Fail:
    """The step fails before it starts (its ``if:`` could not be evaluated)."""

    error: str
    kind: FailureKind


RUN: Final = Run()

StepDecision = Run | Skip | Fail


@dataclass(frozen=True, slots=True)
class Call:
    """The item's tool is called; ``digest``: the call's cache key, journaled with its result (``item_succeeded``
    ``cache``, what a later run reuses), None for a step without ``cache:``."""

    digest: str | None


@dataclass(frozen=True, slots=True)
class Ended:
    """The item ended without a call (recorded): a cache hit reused, or a ``cache_key`` that failed. ``entry``: its
    ``results`` entry (None for a hit when no template reads the step); ``reused``: it succeeded (a hit)."""

    entry: dict[str, Any] | None
    reused: bool


def decide_step(
    gate: Gate,
    ps: PlannedStep,
    context: Callable[[], Mapping[str, Any]],
    *,
    draining: bool,
    stopped_by: str | None,
) -> StepDecision:
    """Run, skip (with the :class:`Skip` to record) or fail ``ps``. Ask once per step, once every step it
    depends on has ended (the gate remembers what it answered). ``draining``: the run is being interrupted;
    ``stopped_by``: the step whose failure stops new steps from starting."""
    check = gate.check(ps, draining=draining, stopped_by=stopped_by)
    if check.skip is not None:
        return check.skip
    try:
        with status_scope(check.status):
            run = ps.should_run(context())
    except TemplateError as exc:
        return Fail(f"if: {exc}", FailureKind.TEMPLATE_ERROR)
    return RUN if run else check.if_false()


def step_outcome(step: StepState, keys: list[str], *, draining: bool = False) -> StepStatus:
    """How a step that ran ended, from its items ``keys`` in this attempt: interrupted when the run is
    ``draining`` and some item did not end; incomplete when every failure is "not sent" (a resume runs them);
    failed when an item failed, was skipped or is in doubt; else succeeded."""
    mine = [step.items[key] for key in keys if key in step.items]
    if draining and _unended(mine, keys):
        return StepStatus.INTERRUPTED
    return _ended_status(mine)


def _ended_status(mine: list[ItemState]) -> StepStatus:
    if any(item.in_doubt for item in mine):
        return StepStatus.FAILED
    failed = [item for item in mine if item.status in _FAILED]
    if not failed:
        return StepStatus.SUCCEEDED
    return StepStatus.INCOMPLETE if all(item.kind is FailureKind.NOT_SENT for item in failed) else StepStatus.FAILED


def _unended(mine: list[ItemState], keys: list[str]) -> bool:
    """Some item of ``keys`` did not end (never ran, or dispatched with no end)."""
    return len(mine) < len(keys) or any(item.status is ItemStatus.DISPATCHED for item in mine)


_FAILED: Final = (ItemStatus.FAILED, ItemStatus.SKIPPED)


def failed_status(kind: FailureKind) -> StepStatus:
    """The status of a step that fails before it runs: a server that could not be reached leaves it undone
    (incomplete: a resume runs it), anything else fails it."""
    return StepStatus.INCOMPLETE if kind is FailureKind.NOT_SENT else StepStatus.FAILED


def view_status(status: StepStatus) -> Any:
    """``steps.<id>.status`` as templates see it: succeeded, failed or skipped (an incomplete or interrupted
    step did not succeed: failed)."""
    return status.value if status.value in ("succeeded", "failed", "skipped") else "failed"


class StepMachine:
    """One pass over a plan's steps, as both executors make it: what templates read (``steps.<id>``, kept only
    while some step left to run reads it), which step's failure stops new steps, and the records of each
    step's start and end, given to ``emit`` (which applies them to ``state``).

    ``resumed``: earlier attempts' items count (their successes are reused); ``fresh``: steps whose history is
    ignored (they changed). A decision about items in doubt is not an argument: it is journaled before the pass
    (:func:`~runner.engine.core.items.awaiting_decision`) and the fold applies it. ``cache``: the results of
    earlier runs a step with ``cache:`` may reuse (None: none, as with ``--no-cache``; see :meth:`cached`)."""

    def __init__(
        self,
        plan: Plan,
        state: RunState,
        emit: Callable[[AnyEvent], None],
        *,
        inputs: Mapping[str, Any],
        env: Mapping[str, Any],
        resumed: bool = False,
        fresh: frozenset[str] = frozenset(),
        cache: CacheIndex | None = None,
    ) -> None:
        self._plan = plan
        self._state = state
        self._emit = emit
        self._inputs = inputs
        self._env = env
        self._resumed = resumed
        self._fresh = fresh
        self._cache = cache
        self.views: dict[str, Any] = {}
        self.stopped_by: str | None = None
        self._gate = Gate(plan, state)
        self._readiness = Readiness(plan)

    def context(self, item: Any = None, index: int | None = None) -> dict[str, Any]:
        return make_context(inputs=self._inputs, env=self._env, steps=self.views, item=item, index=index)

    def first(self) -> list[str]:
        """The steps that depend on none."""
        return list(self._readiness.first())

    def ended(self, sid: str) -> list[str]:
        """The steps whose last dependency ``sid`` was (to start now); drops the views no step left reads."""
        ready, unread = self._readiness.ended(sid)
        for name in unread:
            self.views.pop(name, None)
        return list(ready)

    def decide(self, ps: PlannedStep, *, draining: bool = False) -> StepDecision:
        return decide_step(self._gate, ps, self.context, draining=draining, stopped_by=self.stopped_by)

    def skip(self, ps: PlannedStep, skip: Skip) -> None:
        self.views[ps.id] = fanout_view([], [], "skipped") if ps.fan_out else step_view(None, status="skipped")
        self._emit(StepSkipped(step=ps.id, reason=skip.reason, cause=skip.cause))

    def fail(self, ps: PlannedStep, error: str, kind: FailureKind) -> None:
        """The step fails before it runs (its ``if:``, its items or keys, its server)."""
        status = failed_status(kind)
        self.views[ps.id] = fanout_view([], [], "failed") if ps.fan_out else step_view(None, status="failed")
        self._stops(ps, status)
        counts = self._state.step(ps.id).counts(live=False).as_dict()
        self._emit(StepFinished(step=ps.id, status=status, counts=counts, error=error, kind=kind))

    def items(self, ps: PlannedStep, secrets_in: Callable[[str], list[str]]) -> tuple[list[Any], list[str]] | None:
        """The step's items and their keys (:func:`~runner.engine.core.items.step_keys`; one item, key ``""``,
        for a plain step); None when they could not be made: the step failed (recorded). ``secrets_in`` says
        which secrets a key holds (the masker locally; on Temporal, where env values are placeholders, the
        masker's own :func:`~runner.masking.placeholders`)."""
        if not ps.fan_out:
            return [None], [""]
        try:
            items = ps.render_items(self.context())
            full_hash = self._state.journal_format < 2
            return items, step_keys(ps, items, self.context, secrets_in=secrets_in, full_hash=full_hash)
        except TemplateError as exc:
            self.fail(ps, str(exc), FailureKind.TEMPLATE_ERROR)
            return None

    def prior(self, sid: str, key: str) -> ItemState | None:
        """What earlier attempts left of an item (None for a first run, or a step whose history is ignored)."""
        if not self._resumed or sid in self._fresh:
            return None
        return self._state.item(sid, key)

    def action(self, sid: str, key: str) -> ItemAction:
        return item_action(self.prior(sid, key), reconcile=self._plan.steps[sid].reconcile is not None)

    def cached(self, ps: PlannedStep, item: Any, index: int | None, args: dict[str, Any]) -> CacheLookup | None:
        """For a step with ``cache:``, the key of the call of ``item`` with ``args`` (rendered) and the result
        an earlier run left for it within the step's duration (a hit: :meth:`reuse` it instead of calling);
        None for a step without a cache. Raises :class:`TemplateError` when its ``cache_key`` fails (the
        item fails, nothing is sent). Asked for every call a step would make, by both executors."""
        if ps.cache is None:
            return None
        extra = ps.render_cache_key(self.context(item, index)) if ps.cache_key is not None else None
        digest = cache_digest(ps.server, ps.tool, args, extra)
        hit = self._cache.find(digest, ps.cache) if self._cache is not None else None
        return CacheLookup(digest, hit)

    def call_or_reuse(
        self, ps: PlannedStep, index: int | None, key: str, item: Any, args: dict[str, Any]
    ) -> Call | Ended:
        """What becomes of an item whose tool is about to be called with ``args`` (rendered): an item to call or
        call again (``CALL``, ``RERUN``), and one whose reconcile tool answered "not done" (called as a call never
        made is). A step with ``cache:`` asks its cache first (:meth:`cached`): a hit is reused (recorded:
        :meth:`reuse`), a ``cache_key`` that fails fails the item (recorded, a template error), a miss is called
        with its key. The one rule both executors follow before a call."""
        try:
            lookup = self.cached(ps, item, index, args)
        except TemplateError as exc:
            error = str(exc)
            self._emit(ItemFailed(step=ps.id, item=key, index=index, kind=FailureKind.TEMPLATE_ERROR, error=error))
            return Ended(item_entry("failed", error), reused=False)
        if lookup is not None and lookup.hit is not None:
            return Ended(self.reuse(ps, index, key, lookup), reused=True)
        return Call(lookup.digest if lookup is not None else None)

    def reuse(self, ps: PlannedStep, index: int | None, key: str, lookup: CacheLookup) -> dict[str, Any] | None:
        """Records a cache hit (``item_succeeded`` with the earlier run's result and ``reused_from``: counted
        as reused) and returns the item's ``results`` entry (None when no template reads the step)."""
        hit = lookup.hit
        assert hit is not None
        self._emit(
            ItemSucceeded(
                step=ps.id, item=key, index=index, result=hit.result, cache=lookup.digest, reused_from=hit.run_id
            )
        )
        return item_entry("succeeded", None, hit.result) if ps.referenced else None

    def start(self, ps: PlannedStep, items: list[Any], keys: list[str]) -> int:
        """Records the step's start; returns how many of its items are reused (succeeded before)."""
        fresh = self._resumed and ps.id in self._fresh
        reused = 0 if fresh else sum(1 for key in keys if self.action(ps.id, key) is ItemAction.REUSE)
        count = len(items) if ps.fan_out else None
        self._emit(StepStarted(step=ps.id, items=count, reused=reused or None, fresh=fresh or None))
        return reused

    def finish(
        self, ps: PlannedStep, items: list[Any], keys: list[str], entries: list[Any], *, draining: bool = False
    ) -> StepStatus:
        """Records how a step that ran ended and makes its view: ``entries`` are its items' ``results`` entries
        (None for an item that did not end), or empty when no template reads the step."""
        status = step_outcome(self._state.step(ps.id), keys, draining=draining)
        if ps.fan_out:
            results: list[Any] = [identified(entries[i], items[i], keys[i], i) for i in range(len(entries))]
            self.views[ps.id] = fanout_view(items if entries else [], results, view_status(status))
        else:
            view = (entries[0] if entries else None) or step_view(None, status=view_status(status))
            view.pop("error", None)
            self.views[ps.id] = view
        self._stops(ps, status)
        self.finished(ps, status)
        return status

    def finished(self, ps: PlannedStep, status: StepStatus) -> None:
        counts = self._state.step(ps.id).counts(live=False).as_dict()
        self._emit(StepFinished(step=ps.id, status=status, counts=counts))

    def _stops(self, ps: PlannedStep, status: StepStatus) -> None:
        if status is StepStatus.FAILED and not ps.continue_on_error:
            self.stopped_by = self.stopped_by or ps.id
