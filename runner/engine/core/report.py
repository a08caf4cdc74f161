"""How a run ended, as typed values: its steps, the items that failed and those in doubt, and the whole
:class:`RunReport` that the ``--json`` summary, the text summary and a Temporal run's result are written from.

Built from the fold (:class:`~runner.engine.core.state.RunState`) and the plan, never from a dict: the
formatters read fields, and :meth:`RunReport.to_json` is the one place the summary's JSON shape
(``schemas/summary.schema.json``) is written. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Final

from runner.engine.core.state import ItemState, RunState, StepCounts, StepState
from runner.engine.core.vocabulary import Decision, FailureKind, RunStatus, SkipCause, StepStatus
from runner.exitcodes import ExitCode
from runner.masking import Masker
from runner.workflow.plan import OutputFailure

__all__ = ["RERUN_PENDING", "SUMMARY_VERSION", "ItemReport", "RunReport", "StepReport", "item_report", "step_report"]

SUMMARY_VERSION: Final = 1
RERUN_PENDING: Final = (
    "; --rerun-in-doubt was decided for it earlier: the next resume calls it again, whatever it is told"
)
_NO_COUNTS: Final = StepCounts(total=0, succeeded=0, failed=0, in_doubt=0, running=0, skipped=0, reused=0)


@dataclass(frozen=True, slots=True)
class ItemReport:
    """An item that failed or is in doubt, or a step that failed as a whole (``item`` None)."""

    step: str
    item: str | None
    index: int | None
    kind: FailureKind
    error: str
    dispatched_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "step": self.step,
            "item": self.item,
            "index": self.index,
            "kind": self.kind.value,
            "error": self.error,
        }
        if self.dispatched_at is not None:
            out["dispatched_at"] = self.dispatched_at
        return out


def item_report(sid: str, item: ItemState) -> ItemReport:
    """``item`` of step ``sid`` as it ended: in doubt (its error says whether a rerun is still to come), or
    failed (a failure of a kind this version does not know reads as a tool error)."""
    if item.in_doubt:
        error = item.error or "dispatched; no result recorded"
        if item.decided is Decision.RERUN:  # journaled by an earlier resume, not carried out yet
            error += RERUN_PENDING
        kind = item.kind or FailureKind.OUTCOME_UNKNOWN
    else:
        error, kind = item.error or "", item.kind or FailureKind.TOOL_ERROR
    return ItemReport(sid, item.key, item.index, kind, error, item.dispatched_at)


@dataclass(frozen=True, slots=True)
class StepReport:
    """How one step ended: its status (``not-run`` for a step never started, or left running), why (a
    skip's reason, or the step's own error), which kind of why for a skipped step, and its items."""

    id: str
    status: StepStatus
    reason: str | None
    cause: SkipCause | None
    counts: StepCounts
    reconciled: int = 0  # of its succeeded items, those its reconcile tool settled

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status.value}
        if self.reason:
            out["reason"] = self.reason
        if self.cause is not None:
            out["cause"] = self.cause.value
        return {**out, **self.counts.as_dict(), "reconciled": self.reconciled}


def step_report(sid: str, step: StepState | None) -> StepReport:
    if step is None:
        return StepReport(sid, StepStatus.NOT_RUN, None, None, _NO_COUNTS)
    status = step.status
    if status is StepStatus.PENDING or status is StepStatus.RUNNING:
        status = StepStatus.NOT_RUN
    cause = step.cause if status is StepStatus.SKIPPED else None
    return StepReport(sid, status, step.reason, cause, step.counts(live=False), step.reconciled)


@dataclass(frozen=True, slots=True)
class RunReport:
    """A run's end as the ``--json`` summary says it (:meth:`to_json`), typed."""

    run_id: str | None
    workflow: str | None
    status: RunStatus
    exit_code: ExitCode
    duration_s: float
    steps: tuple[StepReport, ...]
    outputs: dict[str, Any]
    failures: tuple[ItemReport, ...]
    in_doubt: tuple[ItemReport, ...]
    stray: dict[str, dict[str, int]]
    output_failures: tuple[OutputFailure, ...]
    throttled: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        state: RunState,
        order: Iterable[str],
        *,
        head: tuple[str | None, str | None, RunStatus, ExitCode, float],
        outputs: dict[str, Any],
        failures: Iterable[ItemReport],
        in_doubt: Iterable[ItemReport],
        stray: dict[str, dict[str, int]],
        output_failures: Iterable[OutputFailure],
        throttled: dict[str, dict[str, float]] | None = None,
    ) -> RunReport:
        """The report of ``state``'s steps in plan ``order``; ``head``: run id, workflow file, status, exit code
        and duration."""
        run_id, workflow, status, code, duration = head
        return cls(
            run_id, workflow, status, code, round(duration, 3),
            tuple(step_report(sid, state.steps.get(sid)) for sid in order),
            outputs, tuple(failures), tuple(in_doubt), stray, tuple(output_failures), throttled or {},
        )  # fmt: skip

    def masked(self, masker: Masker) -> RunReport:
        """The report with the values that may hold a secret masked: the outputs, every error and reason (a
        resume reads an earlier attempt's errors back unmasked). What mcp-run names itself (statuses, step
        ids, keys, kinds) is left as it is."""
        if not masker:
            return self

        def error(entry: ItemReport) -> ItemReport:
            return replace(entry, error=masker.mask(entry.error))

        return replace(
            self,
            outputs=masker.mask_value(self.outputs),
            steps=tuple(replace(s, reason=masker.mask(s.reason)) if s.reason else s for s in self.steps),
            failures=tuple(error(f) for f in self.failures),
            in_doubt=tuple(error(d) for d in self.in_doubt),
            output_failures=tuple(replace(f, error=masker.mask(f.error)) for f in self.output_failures),
        )

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` summary (``schemas/summary.schema.json``)."""
        return {
            "version": SUMMARY_VERSION,
            "run_id": self.run_id,
            "workflow": self.workflow,
            "status": self.status.value,
            "exit_code": int(self.exit_code),
            "duration_s": self.duration_s,
            "steps": {step.id: step.to_json() for step in self.steps},
            "outputs": self.outputs,
            "failed": [f.to_json() for f in self.failures],
            "in_doubt": [d.to_json() for d in self.in_doubt],
            "stray": self.stray,
            "throttled": self.throttled,
            "outputs_failed": [
                {"output": f.name, "error": f.error, "file": f.file, "line": f.line, "column": f.column}
                for f in self.output_failures
            ],
        }
