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

The templates see the item's context (``item``, ``index``, ``inputs``, ``env``, ``steps``) and ``key`` (the
item's key), ``args`` (the step's arguments for the item, rendered); ``done`` also ``result`` (the reconcile
tool's result, as ``steps.<id>`` shows one: ``result.json``, ``result.text``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.engine.core.events import ItemReconciled
from runner.engine.core.items import ArgsFailed
from runner.engine.core.vocabulary import Verdict
from runner.workflow.context import step_view
from runner.workflow.plan import PlannedReconcile
from runner.workflow.positions import describe
from runner.workflow.template import TemplateError

__all__ = ["reconcile_args", "reconcile_context", "verdict"]


def reconcile_context(base: Mapping[str, Any], key: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """The context of a reconcile template: the item's (``base``) with ``key`` and ``args``."""
    return {**base, "key": key, "args": args}


def reconcile_args(spec: PlannedReconcile, context: Mapping[str, Any]) -> dict[str, Any] | ArgsFailed:
    """The reconcile call's arguments, or why they could not be rendered (the item then stays in doubt)."""
    try:
        args = spec.args.render(context)
    except TemplateError as exc:
        return ArgsFailed(str(exc))
    if not isinstance(args, dict):
        return ArgsFailed(f"reconcile args rendered to {type(args).__name__}, expected an object")
    return args


def verdict(
    spec: PlannedReconcile,
    context: Mapping[str, Any],
    *,
    step: str,
    key: str,
    index: int | None,
    result: dict[str, Any] | None,
    error: str | None = None,
) -> ItemReconciled:
    """The record of what the reconcile tool said about item ``key`` of ``step``: ``result`` its ``tools/call``
    result (None when there was none, ``error`` saying why)."""
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
    if done is False:
        return ItemReconciled(step=step, item=key, index=index, verdict=Verdict.NOT_DONE)
    return ItemReconciled(
        step=step,
        item=key,
        index=index,
        verdict=Verdict.ERROR,
        error=f"done rendered to {describe(done)}, expected true or false",
    )
