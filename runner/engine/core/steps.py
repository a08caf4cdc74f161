"""Whether a step whose dependencies have all ended runs, is skipped, or fails before it starts: the one
decision both engines make (the local trio scheduler and the Temporal workflow), so the two cannot drift.

Pure: it asks the :class:`~runner.engine.core.conditions.Gate` (how the dependencies ended, an interrupt, a
failure elsewhere), then evaluates the step's ``if:`` inside :func:`~runner.workflow.status.status_scope`.
The ``if:`` is evaluated only when the gate lets the step through; ``context`` is called only then.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from runner.engine.core.conditions import Gate, Skip
from runner.engine.core.events import FailureKind
from runner.workflow.plan import PlannedStep
from runner.workflow.status import status_scope
from runner.workflow.template import TemplateError

__all__ = ["RUN", "Fail", "Run", "StepDecision", "decide_step"]


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
