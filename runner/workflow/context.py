"""The context templates are evaluated against: its roots, and what a step shows in it.

This is the contract between the scheduler, which fills the context as steps finish, and the planner, which
checks that templates read only what will exist (see :mod:`runner.workflow.template`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runner.workflow.template import StepStatus

__all__ = ["fanout_view", "identified", "item_entry", "make_context", "step_view"]


def make_context(
    *,
    inputs: Mapping[str, Any],
    env: Mapping[str, str | None],
    steps: Mapping[str, Any],
    item: Any = None,
    index: int | None = None,
) -> dict[str, Any]:
    """The mapping templates are evaluated against (see the module docstring)."""
    return {"inputs": inputs, "env": env, "steps": steps, "item": item, "index": index}


def step_view(result: Mapping[str, Any] | None, *, status: StepStatus | None = None) -> dict[str, Any]:
    """What ``steps.<id>`` shows for a plain step (or one item of a fan-out) given its MCP result.

    ``result`` is the ``tools/call`` result object (``content``, ``structuredContent``, ``isError``).
    ``text`` joins its text content blocks with ``\\n``; ``json`` is that text parsed as JSON (null when
    it is not JSON); ``status`` defaults to ``failed`` when ``isError`` is true, else ``succeeded``.
    With ``result`` None (a step that was skipped, or failed without a result) every field but
    ``status`` is null.
    """
    if result is None:
        return {"result": None, "structured": None, "text": None, "json": None, "status": status or "failed"}
    text = _text_of(result.get("content"))
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        parsed = None
    if status is None:
        status = "failed" if result.get("isError") else "succeeded"
    return {
        "result": dict(result),
        "structured": result.get("structuredContent"),
        "text": text,
        "json": parsed,
        "status": status,
    }


def _text_of(content: Any) -> str:
    """The text content blocks of a result's ``content``, joined with newlines (a content that is no list has
    none)."""
    blocks = content if isinstance(content, list) else []
    return "\n".join(
        block["text"]
        for block in blocks
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
    )


def item_entry(status: StepStatus, error: str | None = None, result: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One entry of a fan-out step's ``results``: :func:`step_view` plus ``error`` (null on success)."""
    entry = step_view(result, status=status)
    entry["error"] = error
    return entry


def identified(entry: dict[str, Any] | None, item: Any, key: str, index: int) -> dict[str, Any] | None:
    """A fan-out result entry with the item it answers: ``item``, ``key`` and ``index`` beside the rest, so
    a later fan-out over ``results`` knows which item each came from. None stays None (an item that never
    ran: the run was stopping)."""
    return None if entry is None else {**entry, "item": item, "key": key, "index": index}


def fanout_view(items: list[Any], results: list[dict[str, Any]], status: StepStatus) -> dict[str, Any]:
    """What ``steps.<id>`` shows for a fan-out step: ``items``, ``results`` (aligned) and ``status``."""
    return {"items": items, "results": results, "status": status}
