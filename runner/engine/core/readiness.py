"""Which steps may start, and whose results nobody will read again: the scheduler's bookkeeping for many steps.

A run of 20,000 steps must not hold 20,000 of anything it does not need. So a step gets a task only once every
step it depends on has ended (Kahn's algorithm, one step at a time: each edge is counted down once), and a
step's view (``steps.<id>`` in templates, which holds its results) is kept only while some step that reads it
has not ended, or for ever when the workflow's ``outputs`` read it. A chain of steps then holds one or two views
at a time, not all of them.

Pure: it reads the plan and counts; the scheduler starts tasks and drops views as told.
"""

from __future__ import annotations

from collections.abc import Iterable

from runner.workflow.plan import Plan, PlannedStep
from runner.workflow.template import Compiled

__all__ = ["Readiness", "reads_of"]


def _steps_read(parts: Iterable[Compiled | None]) -> set[str]:
    return {
        ref.name
        for part in parts
        if part is not None
        for ref in part.references
        if ref.root == "steps" and ref.name is not None
    }


def reads_of(plan: Plan) -> dict[str, tuple[str, ...]]:
    """step -> the other steps whose views its templates (args, key, if, for_each, cache_key, reconcile's args
    and done) read, in plan order (a set's order would vary from run to run with the hash seed)."""
    order = {sid: at for at, sid in enumerate(plan.steps)}
    return {
        sid: tuple(sorted(_steps_read(_templates(ps)) - {sid}, key=order.__getitem__)) for sid, ps in plan.steps.items()
    }


def _templates(ps: PlannedStep) -> tuple[Compiled | None, ...]:
    spec = ps.reconcile
    reconcile = (spec.args, spec.done) if spec is not None else ()
    return (ps.args, ps.key, ps.condition, ps.for_each, ps.cache_key, *reconcile)


class Readiness:
    """Counts, for each step, the dependencies that have not ended and the readers of its view that have not
    ended. :meth:`first` gives the steps to start with; :meth:`ended` says, when a step ends (however it ends),
    which steps can now start and which views can be dropped."""

    def __init__(self, plan: Plan) -> None:
        self._plan = plan
        self._waiting = {sid: len(ps.dependencies) for sid, ps in plan.steps.items()}
        self._reads = reads_of(plan)
        self._readers_left = dict.fromkeys(plan.steps, 0)
        for names in self._reads.values():
            for name in names:
                self._readers_left[name] += 1
        self._kept = _steps_read((plan.outputs,))
        self._ended: set[str] = set()

    def first(self) -> list[str]:
        """The steps that depend on nothing, in plan order."""
        return [sid for sid in self._plan.order if self._waiting[sid] == 0]

    def ended(self, sid: str) -> tuple[list[str], list[str]]:
        """Step ``sid`` has ended: ``(ready, unread)``, the steps whose last dependency it was (in plan order), and
        the steps whose view no step left to run will read (``sid`` itself when nothing reads it)."""
        if sid in self._ended:
            return [], []
        self._ended.add(sid)
        ready: list[str] = []
        for dependent in self._plan.steps[sid].dependents:
            self._waiting[dependent] -= 1
            if self._waiting[dependent] == 0:
                ready.append(dependent)
        unread: list[str] = []
        for name in self._reads[sid]:
            self._readers_left[name] -= 1
            if self._readers_left[name] == 0 and name in self._ended and name not in self._kept:
                unread.append(name)
        if self._readers_left[sid] == 0 and sid not in self._kept:
            unread.append(sid)
        return ready, unread
