"""A step's items, as both executors (the local trio scheduler and the Temporal workflow) see them: their keys,
and what to do with each one given what earlier attempts left of it. Pure, so the two cannot drift.

==================================================  ==========================================
what an earlier attempt left (``ItemState``)        action
==================================================  ==========================================
nothing (a first run, or a step that changed)       ``CALL``
succeeded (or accepted in doubt)                    ``REUSE`` (its result is not asked again)
skipped in doubt (by this resume or an earlier)     ``SETTLED`` (never called again)
dispatched as a task, no result                     ``COLLECT`` (the task is polled)
in doubt, of a step with ``reconcile:`` (no         ``RECONCILE`` (its reconcile tool is asked first: see
``rerun`` decided)                                               :mod:`runner.engine.core.reconcile`)
in doubt (``rerun`` decided, or nothing to ask)     ``RERUN``    (called again; it may have run, so it is
                                                                 not checked before it is sent)
failed                                              ``CALL``
==================================================  ==========================================

A decision about items in doubt never reaches this table as an argument: both executors journal it first, as
``doubt_decided`` records naming the items :func:`awaiting_decision` gives (the local engine before anything
runs, the Temporal workflow in its ``decide`` update), and the fold applies it: an accepted item arrives here
succeeded, a skipped one skipped, a rerun one in doubt.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from runner.engine.core.state import SKIPPED_IN_DOUBT, ItemState, RunState
from runner.engine.core.vocabulary import Decision, ItemStatus
from runner.workflow.context import item_entry
from runner.workflow.plan import PlannedStep
from runner.workflow.template import TemplateError

__all__ = [
    "ArgsFailed",
    "ItemAction",
    "awaiting_decision",
    "item_action",
    "rendered_args",
    "settled_entry",
    "step_keys",
]


class ItemAction(enum.Enum):
    """What an executor does with one item of a step that runs (see the module docstring)."""

    CALL = "call"
    RERUN = "rerun"
    REUSE = "reuse"
    SETTLED = "settled"
    COLLECT = "collect"
    RECONCILE = "reconcile"

    @property
    def calls(self) -> bool:
        """The item's tool is called (its arguments are rendered first)."""
        return self is ItemAction.CALL or self is ItemAction.RERUN


def item_action(prior: ItemState | None, *, reconcile: bool = False) -> ItemAction:
    """The action for an item given what earlier attempts left of it (``prior``; None: nothing, or a step that
    changed); ``reconcile``: its step has ``reconcile:``."""
    if prior is None:
        return ItemAction.CALL
    if prior.status is ItemStatus.SUCCEEDED:
        return ItemAction.REUSE
    if prior.status is ItemStatus.SKIPPED:
        return ItemAction.SETTLED
    if prior.collectable:
        return ItemAction.COLLECT
    if prior.in_doubt and reconcile and prior.decided is not Decision.RERUN:
        return ItemAction.RECONCILE
    return ItemAction.RERUN if prior.in_doubt else ItemAction.CALL


def awaiting_decision(state: RunState, steps: Collection[str], fresh: Collection[str] = ()) -> dict[str, list[str]]:
    """The items in doubt a decision given now would settle, by step: in doubt, of a step of ``steps`` that did
    not change (not in ``fresh``), neither a task to collect nor already decided to be called again (an earlier
    resume's ``--rerun-in-doubt`` not carried out yet: it is now). The local engine leaves out those safe to
    repeat (called again without asking); on Temporal the activity already called those again."""
    found: dict[str, list[str]] = {}
    for sid, item in state.in_doubt():
        if sid in steps and sid not in fresh and not item.collectable and item.decided is not Decision.RERUN:
            found.setdefault(sid, []).append(item.key)
    return found


def settled_entry(prior: ItemState | None) -> dict[str, Any]:
    """The ``results`` entry of an item skipped in doubt by an earlier decision (``SETTLED``)."""
    error = prior.error if prior is not None else None
    return item_entry("failed", error or SKIPPED_IN_DOUBT)


@dataclass(frozen=True, slots=True)
class ArgsFailed:
    """An item's ``args`` did not render to an object: the item fails (a template error), nothing is sent."""

    error: str


def rendered_args(
    render: Callable[[Any, int | None], Any], item: Any, index: int | None, *, label: str = "args"
) -> dict[str, Any] | ArgsFailed:
    """The item's arguments, or why they could not be rendered; ``label`` names them in that message (``args``,
    a step's; ``reconcile args``, its reconcile tool's)."""
    try:
        args = render(item, index)
    except TemplateError as exc:
        return ArgsFailed(str(exc))
    if not isinstance(args, dict):
        return ArgsFailed(f"{label} rendered to {type(args).__name__}, expected an object")
    return args


def step_keys(
    ps: PlannedStep,
    items: list[Any],
    context_of: Callable[[Any, int], Mapping[str, Any]],
    *,
    secrets_in: Callable[[str], list[str]],
    full_hash: bool = False,
) -> list[str]:
    """The keys of a fan-out's ``items``, in order; :class:`TemplateError` when two are equal or one holds a
    secret. ``secrets_in`` names the secrets a text holds: the masker's answer locally; on Temporal, where
    templates see ``***env.NAME***`` for env values, :func:`runner.masking.placeholders`."""
    keys: list[str] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        key = ps.render_key(context_of(item, index), full_hash=full_hash)
        held = secrets_in(key)
        if held:
            # A key is an item's identity in the journal (and in Temporal's history), written as it is: masked,
            # it would no longer match its item once the secret changes, and a resume would call it again.
            raise TemplateError(
                f"the key of item {index} of step {ps.id!r} holds the value of {', '.join(held)}; keys are "
                "journaled as they are, never masked: give the step a `key` without secrets"
            )
        first = seen.setdefault(key, index)
        if first != index:
            raise TemplateError(ps.same_key(first, index, key))
        keys.append(key)
    return keys
