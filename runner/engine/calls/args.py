"""A fan-out's arguments, item by item: rendered for each item, or once for the whole step when nothing in
them varies from one item to the next."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from runner.workflow.plan import PlannedStep
from runner.workflow.template import TemplateError

__all__ = ["ArgsRenderer", "args_renderer"]

ArgsRenderer = Callable[[Any, "int | None"], Any]
"""``render(item, index)``: the arguments of that item; raises ``TemplateError``."""


def args_renderer(ps: PlannedStep, context: Callable[[Any, int | None], Mapping[str, Any]]) -> ArgsRenderer:
    """How the items of ``ps`` get their arguments (``context(item, index)`` is what templates read).

    A fan-out whose arguments read neither ``item`` nor ``index`` has them rendered once, for all its items:
    the context is the same for each (the steps they read have finished; template functions are pure), and
    so are the arguments (shared: nothing changes them). A template error is then raised for each item
    alike, as rendering each would."""
    if not ps.fan_out or ps.args.is_constant or any(r.root in ("item", "index") for r in ps.args.references):
        return lambda item, index: ps.render_args(context(item, index))
    once: list[tuple[Any, TemplateError | None]] = []

    def render(item: Any, index: int | None) -> Any:
        if not once:
            try:
                once.append((ps.render_args(context(None, None)), None))
            except TemplateError as exc:
                once.append((None, exc))
        args, error = once[0]
        if error is not None:
            raise error.with_traceback(None)
        return args

    return render
