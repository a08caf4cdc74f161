"""Slices of a fan-out passed by reference (pure: no Temporal here).

A slice is ``{"start", "stop", "skip"}``: the items ``start`` to ``stop`` (excluded) of a fan-out step, but
the indices in ``skip`` (settled without a call: reused after a decision, or their arguments did not render).
When the step's ``for_each``, ``key`` and ``args`` read nothing but ``inputs``, ``env``, ``item`` and
``index`` (:func:`by_reference`), anyone holding the run's definition renders the slice's calls exactly as the
run's workflow does (:func:`render_slice`): the same templates, the same context, ``env`` as placeholders.
So a child workflow and its activities are given slices, not the calls: the item list travels through no
history but the run's argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from runner.engine.calls.args import args_renderer
from runner.engine.core.vocabulary import FailureKind
from runner.temporal.spec import RunSpec, encoded_inputs, env_placeholders
from runner.workflow.context import make_context
from runner.workflow.plan import Plan, PlannedStep
from runner.workflow.template import TemplateError

__all__ = ["by_reference", "index_batches", "render_slice", "slice_of", "unrendered"]

_DEFINITION_ONLY: Final = frozenset({"inputs", "env", "item", "index"})


def by_reference(ps: PlannedStep) -> bool:
    """Whether the step's items, keys and arguments can be rendered from the run's definition alone."""
    if not ps.fan_out:
        return False
    compiled = [c for c in (ps.for_each, ps.key, ps.args) if c is not None]
    return all(ref.root in _DEFINITION_ONLY for c in compiled for ref in c.references)


def slice_of(part: list[dict[str, Any]]) -> dict[str, Any]:
    """The slice of ``part`` (calls ``{"at", ...}`` in item order): from its first to its last item."""
    start, stop = part[0]["at"], part[-1]["at"] + 1
    called = {c["at"] for c in part}
    return {"start": start, "stop": stop, "skip": [at for at in range(start, stop) if at not in called]}


def index_batches(piece: Mapping[str, Any], size: int) -> list[dict[str, Any]]:
    """Slice ``piece`` cut into slices of at most ``size`` items to call (one batch activity each)."""
    size = max(1, size)
    skip = set(piece["skip"])
    out: list[dict[str, Any]] = []
    first: int | None = None
    count = 0
    skipped: list[int] = []
    for at in range(piece["start"], piece["stop"]):
        if at in skip:
            if first is not None:
                skipped.append(at)
            continue
        if first is None:
            first = at
        count += 1
        if count == size:
            out.append({"start": first, "stop": at + 1, "skip": skipped})
            first, count, skipped = None, 0, []
    if first is not None:
        out.append({"start": first, "stop": piece["stop"], "skip": [at for at in skipped if at < piece["stop"]]})
    return out


def render_slice(spec: RunSpec, plan: Plan, step: str, piece: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The calls (``{"key", "index", "args", "at"}``) of slice ``piece`` of fan-out ``step``, as the run's
    workflow renders them. A call whose arguments do not render gets an ``error`` instead (the run rendered
    them before giving the slice, so this is not expected). ``TemplateError`` when the items do not render."""
    ps = plan.steps[step]
    inputs = encoded_inputs(plan)
    env = env_placeholders(spec)

    def context(item: Any = None, index: int | None = None) -> Mapping[str, Any]:
        return make_context(inputs=inputs, env=env, steps={}, item=item, index=index)

    items = ps.render_items(context())
    render = args_renderer(ps, context)
    left = set(piece["skip"])
    calls: list[dict[str, Any]] = []
    for at in range(piece["start"], min(piece["stop"], len(items))):
        if at in left:
            continue
        key = ps.render_key(context(items[at], at))
        try:
            calls.append({"key": key, "index": at, "args": render(items[at], at), "at": at})
        except TemplateError as exc:
            calls.append({"key": key, "index": at, "args": None, "at": at, "error": str(exc)})
    return calls


def unrendered(call: Mapping[str, Any]) -> dict[str, Any]:
    """The outcome of a call whose arguments did not render: failed, not sent."""
    kind = FailureKind.TEMPLATE_ERROR.value
    return {"key": call["key"], "index": call["index"], "status": "failed", "kind": kind, "error": call["error"]}
