"""A step's ``reconcile:``: how an item left in doubt is settled by asking the server whether its call happened.
Pure (the executor makes the call): the reconcile call's arguments for an item (:func:`reconcile_args`), and
the verdict its result gives (:func:`verdict`), as an :class:`~runner.engine.core.events.ItemReconciled`
record the executor journals, fsynced, before acting on it.

==================================  =============================================================
what the reconcile tool answered    verdict
==================================  =============================================================
``done`` renders to true            ``done``: the item succeeded (the reconcile result is its own)
``done`` renders to false           ``not-done``: the call surely did not happen; it is made
a tool error, no answer, ``done``   ``error``: the item stays in doubt (a decision, or the next
not a boolean or failing                       resume, settles it)
==================================  =============================================================

When it is asked: on resume, before an item in doubt would be called (the table above, on either executor: the
local resume with no decision, ``resume --engine temporal`` with none); and at the end of the step whose calls
left items in doubt in this attempt (:func:`left_in_doubt`, ``at_end``), where only ``done`` is acted on: a
call that timed out may still be running on the server, so a ``false`` then is recorded as ``error`` (the
item stays in doubt, :data:`NOT_DONE_AT_END` says why) and the resume asks again.

What a verdict makes of the item (:func:`verdict_entry`) is the same on both executors: they call these
functions and journal the record (locally fsynced; on Temporal the reconcile activity's result is in the
workflow's history before the workflow acts on it) before acting on it.

The templates see the item's context (``item``, ``index``, ``inputs``, ``env``, ``steps``) and ``key`` (the
item's key), ``args`` (the step's arguments for the item, rendered); ``done`` also ``result`` (the reconcile
tool's result, as ``steps.<id>`` shows one: ``result.json``, ``result.text``, ...).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

from runner.engine.core.events import ItemReconciled
from runner.engine.core.items import ArgsFailed, rendered_args
from runner.engine.core.state import StepState
from runner.engine.core.vocabulary import Verdict
from runner.workflow.context import item_entry, step_view
from runner.workflow.plan import PlannedReconcile
from runner.workflow.positions import describe
from runner.workflow.template import TemplateError

__all__ = [
    "NOT_DONE_AT_END",
    "left_in_doubt",
    "reconcile_args",
    "reconcile_context",
    "verdict",
    "verdict_entry",
]

NOT_DONE_AT_END: Final = (
    "its reconcile tool said it did not happen, asked right after the call: the call may still be running on the "
    "server, so it is not called again now; it stays in doubt and a resume asks again"
)


def reconcile_context(base: Mapping[str, Any], key: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """The context of a reconcile template: the item's (``base``) with ``key`` and ``args``."""
    return {**base, "key": key, "args": args}


def reconcile_args(spec: PlannedReconcile, context: Mapping[str, Any]) -> dict[str, Any] | ArgsFailed:
    """The reconcile call's arguments, or why they could not be rendered (the item then stays in doubt)."""
    return rendered_args(lambda _item, _index: spec.args.render(context), None, None, label="reconcile args")


def left_in_doubt(step: StepState, keys: Collection[str], asked: Collection[str] = ()) -> list[str]:
    """The keys of ``keys`` (a step's items in this attempt) its calls left in doubt, to ask at the step's end
    (``at_end``): neither a task still to collect nor one asked already in this attempt (``asked``)."""
    out: list[str] = []
    for key in keys:
        item = step.items.get(key)
        if item is not None and item.in_doubt and not item.collectable and key not in asked:
            out.append(key)
    return out


def verdict_entry(record: ItemReconciled, *, referenced: bool) -> tuple[bool, dict[str, Any] | None]:
    """What ``record`` makes of its item: (True, its ``results`` entry) when it settled it, done (the reconcile
    result its own; None when no template reads the step) or still in doubt; (False, None) not done: the item
    is called now."""
    if record.verdict is Verdict.DONE:
        return True, item_entry("succeeded", None, record.result) if referenced else None
    if record.verdict is Verdict.NOT_DONE:
        return False, None
    return True, item_entry("failed", record.error or "in doubt")


def verdict(
    spec: PlannedReconcile,
    context: Mapping[str, Any],
    *,
    step: str,
    key: str,
    index: int | None,
    result: dict[str, Any] | None,
    error: str | None = None,
    at_end: bool = False,
) -> ItemReconciled:
    """The record of what the reconcile tool said about item ``key`` of ``step``: ``result`` its ``tools/call``
    result (None when there was none, ``error`` saying why). ``at_end``: asked at the end of the step whose call
    left the item in doubt, where a ``false`` is not acted on (:data:`NOT_DONE_AT_END`)."""
    if result is None or error is not None:
        return ItemReconciled(step=step, item=key, index=index, verdict=Verdict.ERROR, error=error or "no result")
    if result.get("isError") is True:
        shown = step_view(result).get("text") or "tool reported an error"
        return ItemReconciled(
            step=step, item=key, index=index, verdict=Verdict.ERROR, error=f"the reconcile tool failed: {shown}"
        )
    try:
        done = spec.done.render({**context, "result": step_view(result, status="succeeded")})
    except TemplateError as exc:
        return ItemReconciled(step=step, item=key, index=index, verdict=Verdict.ERROR, error=f"done: {exc}")
    if done is True:
        return ItemReconciled(step=step, item=key, index=index, verdict=Verdict.DONE, result=result)
    if done is False and at_end:
        return ItemReconciled(step=step, item=key, index=index, verdict=Verdict.ERROR, error=NOT_DONE_AT_END)
    if done is False:
        return ItemReconciled(step=step, item=key, index=index, verdict=Verdict.NOT_DONE)
    return ItemReconciled(
        step=step,
        item=key,
        index=index,
        verdict=Verdict.ERROR,
        error=f"done rendered to {describe(done)}, expected true or false",
    )
