"""The step decision both engines share (:func:`runner.engine.core.steps.decide_step`): the gate first, then the
``if:`` under the status functions, and run / skip / fail from those. The end-to-end behaviour of each rule is in
``tests/test_conditions.py`` (local engine) and ``tests/temporal/`` (Temporal); this checks the decision alone,
with the dependency's end folded from journal events."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runner.engine.core.conditions import Gate, Skip
from runner.engine.core.state import RunState
from runner.engine.core.steps import RUN, Fail, StepDecision, decide_step
from runner.engine.core.vocabulary import FailureKind, SkipCause
from runner.workflow.context import make_context
from runner.workflow.plan import Plan
from runner.workflow.status import status_scope
from runner.workflow.template import TemplateError
from tests.harness import plan_of
from tests.support import folded

# How `dep` ended, as the journal says it.
DEP_ENDS: dict[str, list[dict[str, Any]]] = {
    "succeeded": [
        {"type": "step_started", "step": "dep"},
        {"type": "item_dispatched", "step": "dep"},
        {"type": "item_succeeded", "step": "dep", "item": "", "index": None, "result": {}},
        {"type": "step_finished", "step": "dep", "status": "succeeded", "counts": {}},
    ],
    "failed": [
        {"type": "step_started", "step": "dep"},
        {"type": "item_dispatched", "step": "dep"},
        {"type": "item_failed", "step": "dep", "item": "", "kind": "tool-error", "error": "no"},
        {"type": "step_finished", "step": "dep", "status": "failed", "counts": {}},
    ],
    "in doubt": [
        {"type": "step_started", "step": "dep"},
        {"type": "item_dispatched", "step": "dep"},
        {"type": "step_finished", "step": "dep", "status": "failed", "counts": {}},
    ],
    "skipped by its if": [{"type": "step_skipped", "step": "dep", "cause": "if-false"}],
    "skipped until a resume": [{"type": "step_skipped", "step": "dep", "cause": "unfinished"}],
}

# `t`'s `if:` (None: none). The last two fail when evaluated (`inputs.n` is a number, `length` wants a list).
CONDITIONS = [
    None,
    "${{ always() }}",
    "${{ failure() }}",
    "${{ success() }}",
    "${{ !failure() }}",
    "${{ inputs.flag }}",
    "${{ length(inputs.n) > `0` }}",
    "${{ always() && length(inputs.n) > `0` }}",
]


@cache
def plan_with(condition: str | None, flag: bool) -> Plan:
    cond = "" if condition is None else f", if: '{condition}'"
    return plan_of(
        f"""\
version: 1
servers:
  s: {{command: [x]}}
inputs:
  flag: {{type: boolean, default: {str(flag).lower()}}}
  n: {{type: number, default: 3}}
steps:
  dep: {{server: s, tool: echo, args: {{text: d}}}}
  t: {{server: s, tool: echo, needs: [dep]{cond}, args: {{text: t}}}}
"""
    )


class Context:
    """The run's context, counting how often the decision asked for it."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.asked = 0

    def __call__(self) -> Mapping[str, Any]:
        self.asked += 1
        return make_context(inputs=dict(self.plan.input_values or {}), env={}, steps={}, item=None, index=None)


def decide(plan: Plan, state: RunState, ctx: Context, *, draining: bool, stopped_by: str | None) -> StepDecision:
    return decide_step(Gate(plan, state), plan.steps["t"], ctx, draining=draining, stopped_by=stopped_by)


@given(
    dep=st.sampled_from(sorted(DEP_ENDS)),
    condition=st.sampled_from(CONDITIONS),
    flag=st.booleans(),
    draining=st.booleans(),
    stopped_by=st.sampled_from([None, "other"]),
)
def test_the_gate_decides_first_then_the_if(
    dep: str, condition: str | None, flag: bool, draining: bool, stopped_by: str | None
) -> None:
    plan = plan_with(condition, flag)
    state = folded(DEP_ENDS[dep])
    ctx = Context(plan)
    decision = decide(plan, state, ctx, draining=draining, stopped_by=stopped_by)
    check = Gate(plan, state).check(plan.steps["t"], draining=draining, stopped_by=stopped_by)
    if check.skip is not None:
        # Skipped before the `if:` is read: it is never evaluated (one that cannot be evaluated fails nothing).
        assert decision == check.skip
        assert ctx.asked == 0
        return
    assert ctx.asked == 1
    try:
        with status_scope(check.status):
            holds = plan.steps["t"].should_run(Context(plan)())
    except TemplateError as exc:
        assert decision == Fail(f"if: {exc}", FailureKind.TEMPLATE_ERROR)
        return
    if holds:
        assert decision == RUN
    else:
        assert isinstance(decision, Skip) and decision.cause is SkipCause.CONDITION
        assert decision == check.if_false()
    # Never a run during an interrupt, nor after an unsettled dependency.
    assert not (decision == RUN and (draining or dep in ("in doubt", "skipped until a resume")))


def test_examples() -> None:
    def one(dep: str, condition: str | None, *, draining: bool = False, stopped_by: str | None = None) -> Any:
        plan = plan_with(condition, True)
        return decide(plan, folded(DEP_ENDS[dep]), Context(plan), draining=draining, stopped_by=stopped_by)

    assert one("succeeded", None) == RUN
    assert one("failed", "${{ always() }}") == RUN
    assert one("failed", "${{ failure() }}") == RUN
    assert one("failed", None) == Skip(SkipCause.FAILURE, "dependency 'dep' failed")
    assert one("succeeded", None, stopped_by="other") == Skip(SkipCause.FAILURE, "step 'other' failed")
    assert one("succeeded", "${{ always() }}", stopped_by="other") == RUN
    assert one("succeeded", "${{ always() }}", draining=True) == Skip(SkipCause.UNFINISHED, "the run was interrupted")
    held = one("in doubt", "${{ always() && length(inputs.n) > `0` }}")
    assert held == Skip(SkipCause.UNFINISHED, "dependency 'dep' has calls in doubt")
    failed = one("succeeded", "${{ length(inputs.n) > `0` }}")
    assert isinstance(failed, Fail) and failed.kind is FailureKind.TEMPLATE_ERROR
    assert failed.error.startswith("if: ") and "length" in failed.error
    skipped = one("succeeded", "${{ failure() }}")
    assert skipped == Skip(
        SkipCause.CONDITION, "its `if` condition is false (failure() is false: nothing it depends on failed)"
    )
