"""A step's items, as both executors (the local trio scheduler and the Temporal workflow) see them: their keys,
and what to do with each one given what earlier attempts left of it. Pure, so the two cannot drift.

==================================================  ===========  ==========================================
what an earlier attempt left (``ItemState``)        decision     action
==================================================  ===========  ==========================================
nothing (a first run, or a step that changed)       any          ``CALL``
succeeded                                           any          ``REUSE`` (its result is not asked again)
skipped in doubt (by this resume or an earlier)     any          ``SETTLED`` (never called again)
dispatched as a task, no result                     any          ``COLLECT`` (the task is polled)
in doubt                                            ``accept``   ``ACCEPT`` (recorded as done)
in doubt                                            ``skip``     ``SKIP`` (recorded as skipped in doubt)
in doubt                                            ``rerun``,   ``RERUN`` (called again; it may have run,
                                                    or none      so it is not checked before it is sent)
failed                                              any          ``CALL``
==================================================  ===========  ==========================================

The local engine journals a decision (``doubt_decided``) before anything runs, and the fold applies it: its
items reach this table as succeeded or skipped, and it passes no decision. The Temporal workflow passes the
decision its ``decide`` update was given.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runner.engine.core.events import Decision, ItemStatus
from runner.engine.core.state import SKIPPED_IN_DOUBT, ItemState
from runner.workflow.context import item_entry
from runner.workflow.plan import PlannedStep
from runner.workflow.template import TemplateError

__all__ = ["ArgsFailed", "ItemAction", "item_action", "rendered_args", "settled_entry", "step_keys"]


class ItemAction(enum.Enum):
    """What an executor does with one item of a step that runs (see the module docstring)."""

    CALL = "call"
    RERUN = "rerun"
    REUSE = "reuse"
    SETTLED = "settled"
    COLLECT = "collect"
    ACCEPT = "accept"
    SKIP = "skip"

    @property
    def calls(self) -> bool:
        """The item's tool is called (its arguments are rendered first)."""
        return self is ItemAction.CALL or self is ItemAction.RERUN


def item_action(prior: ItemState | None, decision: Decision | None = None) -> ItemAction:
    """The action for an item given what earlier attempts left of it (``prior``; None: nothing, or a step that
    changed) and the decision about items in doubt, if one is to be carried out here."""
    if prior is None:
        return ItemAction.CALL
    if prior.status is ItemStatus.SUCCEEDED:
        return ItemAction.REUSE
    if prior.status is ItemStatus.SKIPPED:
        return ItemAction.SETTLED
    if prior.collectable:
        return ItemAction.COLLECT
    if not prior.in_doubt:
        return ItemAction.CALL
    if decision is Decision.ACCEPT:
        return ItemAction.ACCEPT
    if decision is Decision.SKIP:
        return ItemAction.SKIP
    return ItemAction.RERUN


def settled_entry(prior: ItemState | None) -> dict[str, Any]:
    """The ``results`` entry of an item skipped in doubt by an earlier decision (``SETTLED``)."""
    error = prior.error if prior is not None else None
    return item_entry("failed", error or SKIPPED_IN_DOUBT)


@dataclass(frozen=True, slots=True)
class ArgsFailed:
    """An item's ``args`` did not render to an object: the item fails (a template error), nothing is sent."""

    error: str


def rendered_args(
    render: Callable[[Any, int | None], Any], item: Any, index: int | None
) -> dict[str, Any] | ArgsFailed:
    """The item's arguments, or why they could not be rendered."""
    try:
        args = render(item, index)
    except TemplateError as exc:
        return ArgsFailed(str(exc))
    if not isinstance(args, dict):
        return ArgsFailed(f"args rendered to {type(args).__name__}, expected an object")
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
