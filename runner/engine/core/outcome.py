"""How a run ended, read off its :class:`~runner.engine.core.state.RunState`: status, exit code, failures, items in
doubt, and the ``--json`` summary. Pure: the same state always settles the same way.

- **Items in doubt** are every item without a definite answer, this attempt's or an earlier one's that this
  attempt did not call again: while one is left the run is ``in-doubt`` and stays open.
- **Failures** are the items that failed or were skipped in doubt, and the steps that failed as a whole.
  A skipped step is never a failure: the failure that caused the skip is.
- **The exit code** is the strongest of what applies (see :func:`runner.exitcodes.combine`): each failure's
  kind says its code (:class:`~runner.engine.core.events.FailureKind`), except that a ``continue_on_error`` step's
  failures do not count, and items never sent (their server could not be reached) always do.
- **Outputs** are rendered each on its own: one that fails is left out and named (``output_failures``), the
  others are kept; a failed output fails the run (exit 1), as a failed step does.
- **The status**: ``interrupted`` on a signal; else ``in-doubt`` while items are in doubt; else
  ``incomplete`` when something was never sent (a resume finishes it); else ``failed`` or ``succeeded``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from runner.engine.core.events import Decision, FailureKind, ItemStatus, RunStatus, SkipCause, StepStatus
from runner.engine.core.state import ItemState, RunState
from runner.exitcodes import ExitCode, combine
from runner.masking import Masker
from runner.workflow.plan import OutputFailure, Plan

__all__ = ["SUMMARY_VERSION", "Outcome", "StepOutcome", "masked_summary", "settle", "summary"]

RERUN_PENDING: Final = (
    "; --rerun-in-doubt was decided for it earlier: the next resume calls it again, whatever it is told"
)

SUMMARY_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """How one step ended: its status, why (a skip's reason, or the step's own error), and its items;
    ``cause``: which kind of why, for a skipped step."""

    status: StepStatus
    reason: str | None
    total: int
    succeeded: int
    failed: int
    in_doubt: int
    skipped: int
    reused: int
    cause: SkipCause | None = None

    def counts(self) -> dict[str, int]:
        return {
            "total": self.total,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "in_doubt": self.in_doubt,
            "skipped": self.skipped,
            "reused": self.reused,
        }


@dataclass
class Outcome:
    """The end of one attempt of a run. ``state`` is the run's whole state (every attempt); ``blocked``:
    nothing ran, items in doubt need a decision; ``stray``: per server, what it sent that matched nothing."""

    status: RunStatus
    exit_code: ExitCode
    state: RunState = field(repr=False)
    outputs: dict[str, Any]
    failures: list[dict[str, Any]]
    in_doubt: list[dict[str, Any]]
    blocked: bool = False
    stray: dict[str, dict[str, int]] = field(default_factory=dict)
    output_failures: list[OutputFailure] = field(default_factory=list)
    """The outputs that failed to render (absent from ``outputs``), in the workflow's order."""
    # Filled by the run lifecycle (runner.engine.run): which run, where, what it ran, how long it took.
    run_id: str | None = None
    run_dir: Path | None = None
    plan: Plan | None = None
    duration: float = 0.0
    masker: Masker = field(default_factory=Masker, repr=False)  # the run's secrets, to mask what is printed

    def summary(self) -> dict[str, Any]:
        """The ``--json`` summary of this outcome (see :func:`summary`), the run's secrets masked value by value
        (``outputs`` holds the values themselves, for a program's use: mask before printing them)."""
        assert self.plan is not None, "an outcome of a run (runner.engine.run) knows its plan"
        return masked_summary(summary(self.plan, self, run_id=self.run_id, duration=self.duration), self.masker)

    @property
    def steps(self) -> dict[str, StepOutcome]:
        """Each step of the plan, in order, as it ended."""
        order = self.plan.order if self.plan is not None else tuple(self.state.steps)
        out: dict[str, StepOutcome] = {}
        for sid in order:
            step = self.state.steps.get(sid)
            if step is None:
                out[sid] = StepOutcome(StepStatus.NOT_RUN, None, 0, 0, 0, 0, 0, 0)
                continue
            c = step.counts(live=False)
            status = self.step_status(sid)
            out[sid] = StepOutcome(
                status, step.reason, c.total, c.succeeded, c.failed, c.in_doubt, c.skipped, c.reused,
                step.cause if status is StepStatus.SKIPPED else None,
            )  # fmt: skip
        return out

    def step_status(self, sid: str) -> StepStatus:
        step = self.state.steps.get(sid)
        if step is None or step.status in (StepStatus.PENDING, StepStatus.RUNNING):
            return StepStatus.NOT_RUN
        return step.status


def _item_entry(sid: str, item: ItemState, kind: FailureKind | None, error: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "step": sid,
        "item": item.key,
        "index": item.index,
        "kind": (kind or FailureKind.OUTCOME_UNKNOWN).value,
        "error": error or "",
    }
    if item.dispatched_at is not None:
        entry["dispatched_at"] = item.dispatched_at
    return entry


def settle(
    plan: Plan,
    state: RunState,
    *,
    interrupted: bool = False,
    blocked: bool = False,
    outputs: dict[str, Any] | None = None,
    outputs_failed: bool = False,
    output_failures: Sequence[OutputFailure] = (),
    stray: dict[str, dict[str, int]] | None = None,
) -> Outcome:
    """The outcome of a run whose events ``state`` folded (see the module docstring). ``output_failures``:
    the outputs that failed to render; ``outputs_failed``: some did, unnamed (an engine that renders the
    outputs as one)."""
    codes: set[ExitCode] = set()
    failures: list[dict[str, Any]] = []
    in_doubt: list[dict[str, Any]] = []
    for sid in plan.order:
        step = state.steps.get(sid)
        if step is None:
            continue
        lenient = plan.steps[sid].continue_on_error
        if step.kind is not None and step.status in (StepStatus.FAILED, StepStatus.INCOMPLETE):
            failures.append({"step": sid, "item": None, "index": None, "kind": step.kind.value, "error": step.reason})
            if step.kind is FailureKind.NOT_SENT or not lenient:
                codes.add(step.kind.exit_code)
        for item in step.items.values():
            if item.in_doubt:
                error = item.error or "dispatched; no result recorded"
                if item.decided is Decision.RERUN:  # journaled by an earlier resume, not carried out yet
                    error += RERUN_PENDING
                in_doubt.append(_item_entry(sid, item, item.kind, error))
                codes.add(ExitCode.OUTCOME_UNKNOWN)
            elif item.status is ItemStatus.FAILED or item.status is ItemStatus.SKIPPED:
                kind = item.kind or FailureKind.TOOL_ERROR
                failures.append(_item_entry(sid, item, kind, item.error))
                if kind is FailureKind.NOT_SENT or not lenient:
                    codes.add(kind.exit_code)
    if outputs_failed or output_failures:
        codes.add(ExitCode.FAILED)
    if interrupted:
        status = RunStatus.INTERRUPTED
    elif in_doubt:
        status = RunStatus.IN_DOUBT
    elif ExitCode.UNREACHABLE in codes:
        status = RunStatus.INCOMPLETE
    elif any(code != ExitCode.OK for code in codes):
        status = RunStatus.FAILED
    else:
        status = RunStatus.SUCCEEDED
    return Outcome(
        status=status,
        exit_code=combine(codes),
        plan=plan,
        state=state,
        outputs=outputs or {},
        failures=failures,
        in_doubt=in_doubt,
        blocked=blocked,
        stray=stray or {},
        output_failures=list(output_failures),
    )


def masked_summary(data: dict[str, Any], masker: Masker) -> dict[str, Any]:
    """``data`` (a summary) with the values that may hold a secret masked: the outputs, every error and
    reason (a resume reads an earlier attempt's errors back unmasked). What mcp-run names itself (statuses,
    step ids, keys, kinds) is left as it is."""
    if not masker:
        return data

    def texts(entry: dict[str, Any], *names: str) -> dict[str, Any]:
        return {k: masker.mask_value(v) if k in names else v for k, v in entry.items()}

    return {
        **data,
        "outputs": masker.mask_value(data["outputs"]),
        "steps": {sid: texts(step, "reason") for sid, step in data["steps"].items()},
        "failed": [texts(entry, "error") for entry in data["failed"]],
        "in_doubt": [texts(entry, "error") for entry in data["in_doubt"]],
        "outputs_failed": [texts(entry, "error") for entry in data.get("outputs_failed", [])],
    }


def summary(plan: Plan, outcome: Outcome, *, run_id: str | None, duration: float) -> dict[str, Any]:
    """The ``--json`` summary (``schemas/summary.schema.json``)."""
    steps: dict[str, Any] = {}
    for sid in plan.order:
        step = outcome.state.steps.get(sid)
        status = outcome.step_status(sid)
        entry: dict[str, Any] = {"status": status.value}
        if step is not None and step.reason:
            entry["reason"] = step.reason
        if step is not None and status is StepStatus.SKIPPED and step.cause is not None:
            entry["cause"] = step.cause.value
        if step is not None:
            counts = step.counts(live=False).as_dict()
        else:
            counts = {"total": 0, "succeeded": 0, "failed": 0, "in_doubt": 0, "skipped": 0, "reused": 0}
        steps[sid] = {**entry, **counts}
    return {
        "version": SUMMARY_VERSION,
        "run_id": run_id,
        "workflow": plan.file,
        "status": outcome.status.value,
        "exit_code": int(outcome.exit_code),
        "duration_s": round(duration, 3),
        "steps": steps,
        "outputs": outcome.outputs,
        "failed": outcome.failures,
        "in_doubt": outcome.in_doubt,
        "stray": outcome.stray,
        "outputs_failed": [
            {"output": f.name, "error": f.error, "file": f.file, "line": f.line, "column": f.column}
            for f in outcome.output_failures
        ],
    }
