"""The status functions of ``if:``: ``success()``, ``failure()`` and ``always()``, as in GitHub Actions.

They are JMESPath functions of the template function table (:class:`StatusFunctions`), valid only in a
step's ``if:`` (the planner refuses them anywhere else). Their values are
not in the template context: the scheduler works them out for the step it is deciding (a :class:`Status`)
and evaluates the ``if:`` inside :func:`status_scope`, which hands them to the functions.

What they mean (the engine's :mod:`runner.engine.core.conditions` computes them; docs/format.md has the table):

* ``success()``: every dependency succeeded (a ``continue_on_error`` step counts as succeeded), and no
  step of the run has failed. The implicit default: an ``if:`` that calls no status function is read as
  ``success() && (if)``, and a step without ``if:`` as ``success()``.
* ``failure()``: some step this one depends on, directly or through other steps, failed.
* ``always()``: true.

An ``if:`` that calls any of them, anywhere (``!failure()`` too), drops the implicit ``success()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final

from jmespath.functions import Functions, signature
from jmespath.parser import Parser

__all__ = ["STATUS_FUNCTIONS", "Status", "StatusFunctions", "status_functions_in", "status_scope"]

STATUS_FUNCTIONS: Final = ("success", "failure", "always")


@dataclass(frozen=True, slots=True)
class Status:
    """What the status functions say for one step. ``called`` records the functions its ``if:`` called, in
    order, with what they returned (the scheduler explains a false ``if:`` with them)."""

    success: bool
    failure: bool
    called: list[tuple[str, bool]] = field(default_factory=list, compare=False)


_CURRENT: ContextVar[Status | None] = ContextVar("mcp_run_status", default=None)


@contextmanager
def status_scope(status: Status) -> Iterator[Status]:
    """Evaluate an ``if:`` inside this block: its status functions answer from ``status``."""
    token = _CURRENT.set(status)
    try:
        yield status
    finally:
        _CURRENT.reset(token)


def _answer(name: str, value: bool | None = None) -> bool:
    status = _CURRENT.get()
    if status is None:
        # The planner refuses status functions outside `if:`, so this is a bug, not a user error; it still
        # surfaces as a template error (a ValueError becomes one) rather than a traceback.
        raise ValueError(f"{name}() is defined only in a step's if:")
    answer = value if value is not None else bool(getattr(status, name))
    status.called.append((name, answer))
    return answer


class StatusFunctions(Functions):
    """JMESPath's built-in functions plus the status functions (see the module docstring)."""

    @signature()
    def _func_success(self) -> bool:
        return _answer("success")

    @signature()
    def _func_failure(self) -> bool:
        return _answer("failure")

    @signature()
    def _func_always(self) -> bool:
        return _answer("always", True)


def status_functions_in(expression: str) -> tuple[str, ...]:
    """The status functions a JMESPath expression calls, each once, in the order they appear."""
    return _called(expression)


@lru_cache(maxsize=1024)
def _called(expression: str) -> tuple[str, ...]:
    if not any(name in expression for name in STATUS_FUNCTIONS):
        return ()
    names: list[str] = []
    stack: list[Any] = [Parser().parse(expression).parsed]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        if node.get("type") == "function_expression" and node.get("value") in STATUS_FUNCTIONS:
            names.append(node["value"])
        stack.extend(reversed(node.get("children") or ()))
    return tuple(dict.fromkeys(names))
