"""Whether a step starts: how its dependencies ended, what the status functions of its ``if:`` say, and why
it is skipped when it is not. Pure: it reads the plan and the run's :class:`~runner.engine.core.state.RunState`.

The rules follow GitHub Actions' ``jobs.<job_id>.needs`` and status check functions (see
:mod:`runner.workflow.status` and the table in docs/format.md). When every dependency of a step has ended:

1. A dependency without a definite outcome (calls in doubt, its server unreachable, interrupted, or itself
   held back for one of these reasons) holds the step back, whatever its ``if:`` says: the run stays open
   and a resume decides (cause ``unfinished``). ``always()`` does not run a step before what it needs is
   settled.
2. An ``if:`` that calls no status function is ``success() && (if)``. ``success()`` is false when a
   dependency failed (cause ``failure``), was skipped (cause ``dependency-skipped``, or ``failure`` when it
   was skipped because something failed), or when another step has failed (no new step starts after a
   failure; cause ``failure``).
3. During an interrupt no step starts (cause ``unfinished``).
4. Otherwise the ``if:`` is evaluated with ``success()``, ``failure()`` (something the step depends on,
   directly or through other steps, failed) and ``always()``; false skips the step (cause ``if-false``).

A ``continue_on_error`` step that failed counts as succeeded: ``success()`` holds and ``failure()`` does not
see it. A skipped step never fails the run: only the failure that caused it does.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.engine.core.state import RunState, StepState
from runner.engine.core.vocabulary import ItemStatus, SkipCause, StepStatus
from runner.workflow.plan import Plan, PlannedStep
from runner.workflow.status import Status

__all__ = ["Check", "Gate", "Skip"]

_CONDITION_FALSE = "its `if` condition is false"


@dataclass(frozen=True, slots=True)
class Check:
    """What is known before a step's ``if:`` is evaluated: ``skip`` when it is skipped without evaluating it;
    else ``status``, what its status functions answer, with why ``success()`` is false (``unmet``) and the
    step ``failure()`` found (``failed``)."""

    skip: Skip | None
    status: Status
    unmet: Skip | None = None
    failed: str | None = None

    def if_false(self) -> Skip:
        """The skip of a step whose ``if:`` was false, saying what its status functions answered when false."""
        said: list[str] = []
        for name, value in dict(self.status.called).items():
            if value:
                continue
            if name == "success" and self.unmet is not None:
                said.append(f"success() is false: {self.unmet.reason}")
            elif name == "failure":
                said.append("failure() is false: nothing it depends on failed")
        return Skip(SkipCause.CONDITION, _CONDITION_FALSE + (f" ({'; '.join(said)})" if said else ""))


@dataclass(frozen=True, slots=True)
class Skip:
    """A step skipped: ``cause`` (journaled as ``step_skipped.cause``) and ``reason`` in words."""

    cause: SkipCause
    reason: str


class Gate:
    """Decides, step by step, whether each may start (see the module docstring). Ask about a step only once
    every step it depends on has ended: the scheduler asks in dependency order, and the gate remembers, per
    step, the failure above it that ``failure()`` reports."""

    def __init__(self, plan: Plan, state: RunState) -> None:
        self._plan = plan
        self._state = state
        self._failed_above: dict[str, str | None] = {}

    def check(self, ps: PlannedStep, *, draining: bool, stopped_by: str | None) -> Check:
        """``stopped_by``: the step whose failure stops new steps from starting (None while none has)."""
        failed = self._failed_above[ps.id] = self._failure_above(ps)
        held = self._held_back(ps)
        if held is not None:
            return Check(held, Status(success=False, failure=False))
        unmet = self._unmet(ps, failed)
        implicit = not ps.status_checks
        if implicit and unmet is not None:
            return Check(unmet, Status(success=False, failure=failed is not None))
        if draining:
            return Check(Skip(SkipCause.UNFINISHED, "the run was interrupted"), Status(success=False, failure=False))
        if unmet is None and stopped_by is not None:
            unmet = Skip(SkipCause.FAILURE, f"step {stopped_by!r} failed")
            if implicit:
                return Check(unmet, Status(success=False, failure=failed is not None))
        return Check(None, Status(success=unmet is None, failure=failed is not None), unmet=unmet, failed=failed)

    # -- what each dependency says -------------------------------------------------------------------------------

    def _held_back(self, ps: PlannedStep) -> Skip | None:
        for dep in ps.dependencies:
            step = self._state.step(dep)
            status = step.status
            if status is StepStatus.FAILED and _in_doubt(step):
                # continue_on_error too: what its dependents would read is not known yet
                return Skip(SkipCause.UNFINISHED, f"dependency {dep!r} has calls in doubt")
            if status is StepStatus.SUCCEEDED or self._lenient(dep, step):
                continue
            if status is StepStatus.INCOMPLETE:
                return Skip(SkipCause.UNFINISHED, f"dependency {dep!r} is incomplete (its server could not be reached)")
            if status is StepStatus.SKIPPED and step.cause is SkipCause.UNFINISHED:
                return Skip(SkipCause.UNFINISHED, f"dependency {dep!r} was skipped until a resume")
            if status not in (StepStatus.FAILED, StepStatus.SKIPPED):
                return Skip(SkipCause.UNFINISHED, f"dependency {dep!r} was {status.value}")
        return None

    def _unmet(self, ps: PlannedStep, failed_above: str | None) -> Skip | None:
        """Why ``success()`` is false for ``ps`` as far as its dependencies go (None: they all succeeded). A
        failed dependency is named before a skipped one."""
        skipped: Skip | None = None
        for dep in ps.dependencies:
            step = self._state.step(dep)
            if step.status is StepStatus.FAILED and not self._lenient(dep, step):
                how = ": calls skipped in doubt (--skip-in-doubt)" if _only_skipped_in_doubt(step) else ""
                return Skip(SkipCause.FAILURE, f"dependency {dep!r} failed{how}")
            if step.status is StepStatus.SKIPPED:
                skipped = self._first_skip(dep, step, skipped)
        if skipped is not None and skipped.cause is SkipCause.DEPENDENCY_SKIPPED and failed_above is not None:
            # Skipped by its own `if` (`!failure()`, say), but something further up failed: that is the cause.
            return Skip(SkipCause.FAILURE, f"{skipped.reason}, after {failed_above!r} failed")
        return skipped

    def _first_skip(self, dep: str, step: StepState, skipped: Skip | None) -> Skip:
        """The skipped dependency to name, ``dep`` (skipped) seen after ``skipped``: the first one skipped after a
        failure, else the first one skipped at all."""
        if skipped is not None and skipped.cause is SkipCause.FAILURE:
            return skipped
        if step.cause is SkipCause.FAILURE:
            root = self._failed_above.get(dep)
            because = f"because {root!r} failed" if root is not None else "after a failure"
            return Skip(SkipCause.FAILURE, f"dependency {dep!r} was skipped {because}")
        if skipped is None:
            return Skip(SkipCause.DEPENDENCY_SKIPPED, f"dependency {dep!r} was skipped")
        return skipped

    def _failure_above(self, ps: PlannedStep) -> str | None:
        """The first step ``ps`` depends on, directly or not, that failed (what ``failure()`` sees)."""
        for dep in ps.dependencies:
            step = self._state.step(dep)
            if step.status is StepStatus.FAILED and not self._lenient(dep, step) and not _in_doubt(step):
                return dep
        for dep in ps.dependencies:
            above = self._failed_above.get(dep)
            if above is not None:
                return above
        return None

    def _lenient(self, dep: str, step: StepState) -> bool:
        return step.status is StepStatus.FAILED and self._plan.steps[dep].continue_on_error


def _in_doubt(step: StepState) -> bool:
    return any(item.in_doubt for item in step.items.values())


def _only_skipped_in_doubt(step: StepState) -> bool:
    """A step that failed only because a resume skipped its calls in doubt (``--skip-in-doubt``)."""
    n = step.by_status
    return step.kind is None and n[ItemStatus.SKIPPED] > 0 and n[ItemStatus.FAILED] == 0
