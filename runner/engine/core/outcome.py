"""How a run ended, read off its :class:`~runner.engine.core.state.RunState`: status, exit code, failures, items in
doubt, and the ``--json`` summary. Pure: the same state always settles the same way.

- **Items in doubt** are every item without a definite answer, this attempt's or an earlier one's that this
  attempt did not call again: while one is left the run is ``in-doubt`` and stays open.
- **Failures** are the items that failed or were skipped in doubt, and the steps that failed as a whole.
  A skipped step is never a failure: the failure that caused the skip is.
- **The exit code** is the strongest of what applies (see :func:`runner.exitcodes.combine`): each failure's
  kind says its code (:class:`~runner.engine.core.vocabulary.FailureKind`), except that a ``continue_on_error`` step's
  failures do not count, and items never sent (their server could not be reached) always do.
- **Outputs** are rendered each on its own: one that fails is left out and named (``output_failures``), the
  others are kept; a failed output fails the run (exit 1), as a failed step does.
- **The status**: ``interrupted`` on a signal; else ``in-doubt`` while items are in doubt; else
  ``incomplete`` when something was never sent (a resume finishes it); else ``failed`` or ``succeeded``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from runner.engine.core.report import (
    RERUN_PENDING,
    SUMMARY_VERSION,
    ItemReport,
    RunReport,
    StepReport,
    item_report,
    step_report,
)
from runner.engine.core.state import RunState, StepState
from runner.engine.core.vocabulary import FailureKind, ItemStatus, RunStatus, SkipCause, StepStatus
from runner.exitcodes import ExitCode, combine
from runner.masking import Masker
from runner.workflow.plan import OutputFailure, Plan

__all__ = ["RERUN_PENDING", "SUMMARY_VERSION", "Outcome", "StepOutcome", "settle", "summary"]


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """How one step ended: its status, why (a skip's reason, or the step's own error), and its items;
    ``cause``: which kind of why, for a skipped step. (The Python API's view of a :class:`StepReport`.)"""

    status: StepStatus
    reason: str | None
    total: int
    succeeded: int
    failed: int
    in_doubt: int
    skipped: int
    reused: int
    cause: SkipCause | None = None

    @classmethod
    def of(cls, report: StepReport) -> StepOutcome:
        c = report.counts
        return cls(
            report.status, report.reason, c.total, c.succeeded, c.failed, c.in_doubt, c.skipped, c.reused,
            report.cause,
        )  # fmt: skip

    def counts(self) -> dict[str, int]:
        """As the summary counts (``total``, ``succeeded``, ``failed``, ``in_doubt``, ``skipped``, ``reused``)."""
        return {name: getattr(self, name) for name in _COUNTED}


_COUNTED: Final = ("total", "succeeded", "failed", "in_doubt", "skipped", "reused")


@dataclass
class Outcome:
    """The end of one attempt of a run. ``state`` is the run's whole state (every attempt); ``blocked``:
    nothing ran, items in doubt need a decision; ``stray``: per server, what it sent that matched nothing;
    ``throttled``: per server that refused calls for now (429/503), how often and how long it paused them."""

    status: RunStatus
    exit_code: ExitCode
    state: RunState = field(repr=False)
    outputs: dict[str, Any]
    failure_reports: tuple[ItemReport, ...]
    """The items that failed or were skipped in doubt, and the steps that failed as a whole, in plan order."""
    in_doubt_reports: tuple[ItemReport, ...]
    blocked: bool = False
    stray: dict[str, dict[str, int]] = field(default_factory=dict)
    throttled: dict[str, dict[str, float]] = field(default_factory=dict)
    output_failures: list[OutputFailure] = field(default_factory=list)
    """The outputs that failed to render (absent from ``outputs``), in the workflow's order."""
    # Filled by the run lifecycle (runner.engine.run): which run, where, what it ran, how long it took.
    run_id: str | None = None
    run_dir: Path | None = None
    plan: Plan | None = None
    duration: float = 0.0
    masker: Masker = field(default_factory=Masker, repr=False)  # the run's secrets, to mask what is printed

    @property
    def failures(self) -> list[dict[str, Any]]:
        """The failures as the summary's ``failed`` lists them (JSON values)."""
        return [entry.to_json() for entry in self.failure_reports]

    @property
    def in_doubt(self) -> list[dict[str, Any]]:
        """The items in doubt as the summary's ``in_doubt`` lists them (JSON values)."""
        return [entry.to_json() for entry in self.in_doubt_reports]

    def report(self) -> RunReport:
        """This outcome as a :class:`RunReport` (unmasked: :meth:`RunReport.masked` before printing)."""
        order = self.plan.order if self.plan is not None else tuple(self.state.steps)
        workflow = self.plan.file if self.plan is not None else None
        return RunReport.of(
            self.state,
            order,
            head=(self.run_id, workflow, self.status, self.exit_code, self.duration),
            outputs=self.outputs,
            failures=self.failure_reports,
            in_doubt=self.in_doubt_reports,
            stray=self.stray,
            throttled=self.throttled,
            output_failures=self.output_failures,
        )

    def summary(self) -> dict[str, Any]:
        """The ``--json`` summary of this outcome, the run's secrets masked value by value (``outputs`` holds
        the values themselves, for a program's use: mask before printing them)."""
        assert self.plan is not None, "an outcome of a run (runner.engine.run) knows its plan"
        return self.report().masked(self.masker).to_json()

    @property
    def steps(self) -> dict[str, StepOutcome]:
        """Each step of the plan, in order, as it ended."""
        return {step.id: StepOutcome.of(step) for step in self.report().steps}

    def step_status(self, sid: str) -> StepStatus:
        return step_report(sid, self.state.steps.get(sid)).status


def _reports(plan: Plan, state: RunState) -> tuple[list[ItemReport], list[ItemReport], set[ExitCode]]:
    """The failures and the items in doubt of ``state``, in plan order, and the exit codes they mean (a
    ``continue_on_error`` step's failures mean none, unless never sent)."""
    codes: set[ExitCode] = set()
    failures: list[ItemReport] = []
    in_doubt: list[ItemReport] = []
    for sid in plan.order:
        step = state.steps.get(sid)
        if step is None:
            continue
        failed, doubtful = _step_reports(sid, step)
        failures += failed
        in_doubt += doubtful
        lenient = plan.steps[sid].continue_on_error
        codes.update(f.kind.exit_code for f in failed if f.kind is FailureKind.NOT_SENT or not lenient)
        if doubtful:
            codes.add(ExitCode.OUTCOME_UNKNOWN)
    return failures, in_doubt, codes


def _step_reports(sid: str, step: StepState) -> tuple[list[ItemReport], list[ItemReport]]:
    """A step's failures (its own, when it failed as a whole, then its items') and its items in doubt."""
    failed: list[ItemReport] = []
    if step.kind is not None and step.status in (StepStatus.FAILED, StepStatus.INCOMPLETE):
        failed.append(ItemReport(sid, None, None, step.kind, step.reason or ""))
    doubtful: list[ItemReport] = []
    for item in step.items.values():
        if item.in_doubt:
            doubtful.append(item_report(sid, item))
        elif item.status is ItemStatus.FAILED or item.status is ItemStatus.SKIPPED:
            failed.append(item_report(sid, item))
    return failed, doubtful


def _status(codes: set[ExitCode], *, interrupted: bool, in_doubt: bool) -> RunStatus:
    if interrupted:
        return RunStatus.INTERRUPTED
    if in_doubt:
        return RunStatus.IN_DOUBT
    if ExitCode.UNREACHABLE in codes:
        return RunStatus.INCOMPLETE
    if any(code != ExitCode.OK for code in codes):
        return RunStatus.FAILED
    return RunStatus.SUCCEEDED


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
    throttled: dict[str, dict[str, float]] | None = None,
) -> Outcome:
    """The outcome of a run whose events ``state`` folded (see the module docstring). ``output_failures``:
    the outputs that failed to render; ``outputs_failed``: some did, unnamed (an engine that renders the
    outputs as one)."""
    failures, in_doubt, codes = _reports(plan, state)
    if outputs_failed or output_failures:
        codes.add(ExitCode.FAILED)
    return Outcome(
        status=_status(codes, interrupted=interrupted, in_doubt=bool(in_doubt)),
        exit_code=combine(codes),
        plan=plan,
        state=state,
        outputs=outputs or {},
        failure_reports=tuple(failures),
        in_doubt_reports=tuple(in_doubt),
        blocked=blocked,
        stray=stray or {},
        throttled=throttled or {},
        output_failures=list(output_failures),
    )


def summary(plan: Plan, outcome: Outcome, *, run_id: str | None, duration: float) -> dict[str, Any]:
    """The ``--json`` summary (``schemas/summary.schema.json``) of ``outcome``, unmasked."""
    return replace(outcome.report(), run_id=run_id, workflow=plan.file, duration_s=round(duration, 3)).to_json()
