"""What ``mcp-run run``/``resume`` print when a run ends, and the refusals they print before one starts.

Everything here turns a library value (an :class:`~runner.engine.core.outcome.Outcome`, a typed refusal from
:mod:`runner.engine.core.resume`) into text; the commands it names go through :mod:`runner.cli.where`, so they
work when pasted into the same shell in the same directory.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.cli.where import decision_lines, resume_hint, run_hint, runs_hint, short, show_hint
from runner.engine.core.outcome import Outcome
from runner.engine.core.report import ItemReport
from runner.engine.core.resume import (
    NoRunToRetry,
    NothingToRetry,
    NoUnfinishedRun,
    RunAlreadyFinished,
    RunDamaged,
    UnfinishedRun,
)
from runner.engine.core.vocabulary import RunStatus
from runner.engine.journal.rundir import WorkflowBusy
from runner.errors import BusyError, JournalWriteError, McpRunError, UsageError
from runner.exitcodes import ExitCode, combine
from runner.jsontext import escape
from runner.masking import Masker
from runner.termsafe import terminal
from runner.view.text import format_group, group_failures, kept_words, kind_words, one_line, skip_label, where
from runner.words import plural
from runner.workflow.plan import Plan

__all__ = ["Console", "ReportOptions", "damaged_advice", "explain", "render_summary", "report"]


class Console:
    """What a run prints on stderr as it goes (progress aside): masked, then made safe for a terminal
    (:func:`runner.termsafe.terminal`), filtered by ``--quiet``. It is the run's
    :class:`~runner.engine.run.Reporter`."""

    def __init__(self, quiet: bool, masker: Masker | None = None) -> None:
        self.quiet = quiet
        self.masker = masker or Masker()

    def info(self, text: str) -> None:
        if not self.quiet:
            print(terminal(self.masker.mask(text)), file=sys.stderr, flush=True)

    def warn(self, text: str) -> None:
        if not self.quiet:
            print("mcp-run: warning: " + terminal(self.masker.mask(text)), file=sys.stderr, flush=True)

    def error(self, text: str) -> None:
        print("mcp-run: " + terminal(self.masker.mask(text)), file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class ReportOptions:
    json: bool = False
    output: str | None = None
    quiet: bool = False


def explain(exc: McpRunError, *, state_dir: Path, workflow: Path) -> McpRunError:
    """A refusal of the library as the CLI says it: with the command that does what was meant."""
    name = short(workflow)
    if isinstance(exc, UnfinishedRun):
        status = f"running as process {exc.running_pid}" if exc.running_pid else "interrupted or in doubt"
        if exc.elsewhere is not None:
            # The same workflow by name: or file name, started from another path: a moved folder, a new
            # release directory; or another workflow that shares this state directory and its file name.
            return UsageError(
                f"run {exc.run_id} of {name} is unfinished ({status}); it was started from {exc.elsewhere}. "
                f"If that is this workflow (moved, or an earlier release), finish it with:\n  "
                f"{run_hint(state_dir, workflow, '--resume')}\nIf it is another workflow, give this one a "
                f"`name:` of its own (workflows sharing a state directory are told apart by name:, else by file "
                "name), or its own --state-dir."
            )
        return UsageError(
            f"run {exc.run_id} of {name} is unfinished ({status}). "
            f"Finish it with:\n  {run_hint(state_dir, workflow, '--resume')}\nor start over with --new-run."
        )
    if isinstance(exc, NoRunToRetry):
        return UsageError(
            f"no run of {name} in {short(state_dir)} to retry; start one with:\n  {run_hint(state_dir, workflow)}"
        )
    if isinstance(exc, NoUnfinishedRun):
        if exc.newest_failed is not None:
            return UsageError(
                f"no unfinished run of {name}: its newest run, {exc.newest_failed}, failed; re-attempt what "
                f"failed with:\n  {run_hint(state_dir, workflow, '--retry-failed')}"
            )
        return UsageError(
            f"no unfinished run of {name} in {short(state_dir)}; start one with:\n  {run_hint(state_dir, workflow)}"
        )
    if isinstance(exc, RunAlreadyFinished):
        again = ""
        if exc.status is RunStatus.FAILED:
            hint = resume_hint(state_dir, exc.run_id, workflow, "--retry-failed")
            again = f"; re-attempt its failed items with:\n  {hint}"
        return UsageError(f"{exc}{again}")
    if isinstance(exc, WorkflowBusy):
        who = f"process {exc.pid}" if exc.pid is not None else "another process"
        what = f" (run {exc.run_id})" if exc.run_id else ""
        return BusyError(
            f"{who} is running workflow {name}{what}; one run at a time per workflow. "
            f"See it with:\n  {runs_hint(state_dir, workflow)}",
            pid=exc.pid,
        )
    if isinstance(exc, JournalWriteError) and exc.run_id is not None:
        error = JournalWriteError(
            f"{exc}; when it can be written again: {resume_hint(state_dir, exc.run_id, workflow)}"
        )
        error.run_id = exc.run_id
        return error
    if isinstance(exc, NothingToRetry):
        return NothingToRetry(exc.run_id, workflow=name)
    if isinstance(exc, RunDamaged):
        return damaged_advice(exc, state_dir=state_dir, workflow=workflow)
    return exc


def damaged_advice(exc: RunDamaged, *, state_dir: Path, workflow: Path | None) -> UsageError:
    """A run that cannot be read in full, as the CLI says it: where to look, and how to set it aside."""
    aside = short(state_dir / "damaged")
    run_dir = short(state_dir / "runs" / exc.run_id)
    move = f"mkdir -p {shlex.quote(aside)} && mv {shlex.quote(run_dir)} {shlex.quote(aside)}/"
    see = show_hint(state_dir, exc.run_id, None if exc.first else workflow)
    if exc.first:
        return UsageError(
            f"{exc}. See what it holds with:\n  {see}\nIf it is no run to finish, move it out of the state "
            f"directory:\n  {move}\nor start a new run beside it with --new-run."
        )
    return UsageError(
        f"{exc} (one it cannot read could be the answer to a call, which would then be made again). See what "
        f"can be read with:\n  {see}\nTo start over, start a new run with --new-run, or move this one out of "
        f"the state directory first:\n  {move}"
    )


def _secret_note(plan: Plan) -> str:
    secret = sorted(name for name, spec in plan.workflow.inputs.items() if spec.secret)
    if not secret:
        return ""
    return "\n(secret inputs are never journaled: add " + " ".join(f"--input {n}=..." for n in secret) + ")"


def report(
    outcome: Outcome,
    options: ReportOptions,
    console: Console,
    *,
    state_dir: Path | None,
    resume_command: Callable[..., str] | None = None,
) -> int:
    """Print the summary (text on stderr, or ``--json`` on stdout), the outputs, and what to do about items
    in doubt or a run left open; return the exit code. ``resume_command(*flags)``: the resume command of a run
    kept in no state directory that can be resumed all the same (a run on Temporal waits for the decision
    about its items in doubt)."""
    plan = outcome.plan
    assert plan is not None
    advice = _Advice.of(outcome, state_dir, resume_command)
    summary = outcome.summary()
    # Values are masked before they are serialized: a secret's JSON-escaped form never reaches the text.
    outputs = console.masker.mask_value(outcome.outputs)
    code = outcome.exit_code
    unwritten = _write_outputs(Path(options.output), outputs) if options.output else None
    if unwritten is not None:
        code = combine([code, ExitCode.FAILED])
        summary = {**summary, "exit_code": int(code), "output_file_error": unwritten}
    if options.json:
        print(escape(json.dumps(summary, indent=2, ensure_ascii=False)))
    else:
        if not options.quiet:
            console.info(render_summary(summary, show=advice.show))
        if outputs or unwritten is not None:
            print(escape(json.dumps(outputs, indent=2, ensure_ascii=False)))
    if options.json or options.quiet:  # (the text summary names them already)
        for line in _output_failure_lines(summary):
            console.error(f"error: {line}")
    if unwritten is not None:  # the outputs are not lost: say where they are
        printed = "in the summary's outputs on stdout" if options.json else "printed on stdout"
        kept = f", and kept in the run's journal: {advice.show} --json" if advice.show else ""
        console.error(f"error: {unwritten}; the outputs are {printed}{kept}")
    if outcome.blocked or outcome.in_doubt_reports:
        console.error(_in_doubt_text(outcome.in_doubt_reports, advice, plan))
    left_open = _left_open(outcome, advice, plan)
    if left_open is not None:
        console.error(left_open)
    return int(code)


@dataclass(frozen=True, slots=True)
class _Advice:
    """The commands a run's end names: ``show`` (None when the run is kept in no state directory) and
    ``resume(*flags)``; ``resumable``: the run has a state directory to resume from; ``decidable``: a decision
    about its items in doubt can be given (there, or to a Temporal run waiting for one)."""

    show: str | None
    resume: Callable[..., str]
    resumable: bool
    decidable: bool
    run_id: str | None

    @classmethod
    def of(cls, outcome: Outcome, state_dir: Path | None, resume_command: Callable[..., str] | None) -> _Advice:
        assert outcome.plan is not None
        run_id = outcome.run_id
        workflow = Path(outcome.plan.file) if outcome.plan.file else None
        resumable = run_id is not None and state_dir is not None and workflow is not None

        def resume(*flags: str) -> str:
            if resume_command is not None:
                return resume_command(*flags)
            assert run_id is not None and state_dir is not None and workflow is not None
            return resume_hint(state_dir, run_id, workflow, *flags)

        show = show_hint(state_dir, run_id, workflow) if resumable and state_dir and run_id and workflow else None
        decidable = resumable or (resume_command is not None and run_id is not None)
        return cls(show, resume, resumable, decidable, run_id)


def _in_doubt_text(in_doubt: Sequence[ItemReport], advice: _Advice, plan: Plan) -> str:
    """The calls that may or may not have happened (the first 50), and how to decide about them."""
    rows = "\n".join(
        f"  {where(d.step, d.item)}: {kind_words(d.kind)}"
        + (f", dispatched {d.dispatched_at}" if d.dispatched_at else "")
        for d in in_doubt[:50]
    )
    more = ""
    if len(in_doubt) > 50:
        more = f"\n  ... and {len(in_doubt) - 50} more" + (f" ({advice.show})" if advice.show else "")
    if advice.decidable:
        choices = decision_lines(advice.resume)
        decide = "Check them on the server, then resume with one of:\n" + "\n".join(choices)
        decide += _secret_note(plan)
    else:
        decide = "Check them on the server (a run without a journal cannot be resumed)."
    return f"{plural(len(in_doubt), 'call')} may or may not have happened:\n{rows}{more}\n{decide}"


def _left_open(outcome: Outcome, advice: _Advice, plan: Plan) -> str | None:
    """How to resume a run an interruption or an unreachable server left open (None: it is not)."""
    if not advice.resumable or outcome.status not in (RunStatus.INTERRUPTED, RunStatus.INCOMPLETE):
        return None
    command = f"{advice.resume()}{_secret_note(plan)}"
    if outcome.status is RunStatus.INTERRUPTED:
        return f"run interrupted; resume it with:\n  {command}"
    return f"run {advice.run_id} is incomplete and stays open; resume it with:\n  {command}"


def _write_outputs(path: Path, outputs: dict[str, Any]) -> str | None:
    """Write ``outputs`` (masked) as JSON to ``path`` (``--output``); None when written, else why not (a disk
    that filled up during the run: what can be checked before the first call was, see
    :func:`runner.engine.preflight.check_output`)."""
    text = escape(json.dumps(outputs, indent=2, ensure_ascii=False))
    try:
        path.write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        return f"cannot write the outputs to --output {path}: {exc.strerror or exc}"
    return None


def _output_failure_lines(summary: dict[str, Any]) -> list[str]:
    """``output report failed to render: wf.yaml:12:11: outputs.report: ${{ ... }}: ...``, one per output."""
    return [
        f"output {failure['output']} failed to render: {one_line(failure['error'], 300)}"
        for failure in summary.get("outputs_failed", [])
    ]


_STATUS_ORDER = ("succeeded", "failed", "incomplete", "interrupted", "not-run", "skipped")


def _step_counts(steps: Iterable[dict[str, Any]]) -> str:
    """``3 succeeded, 1 failed, 2 skipped: 1 after a failure, 1 if false``: steps by status, skipped ones by
    why (the summary's ``cause``; a journal of an earlier version does not say), skipped last."""
    steps = list(steps)
    by_status: Counter[str] = Counter(s["status"] for s in steps)
    order = {status: n for n, status in enumerate(_STATUS_ORDER)}
    parts = [f"{n} {status}" for status, n in sorted(by_status.items(), key=lambda kv: order.get(kv[0], len(order)))]
    causes: Counter[str] = Counter(skip_label(s.get("cause")) or "" for s in steps if s["status"] == "skipped")
    causes.pop("", None)
    if len(causes) == 1 and sum(causes.values()) == by_status["skipped"]:
        parts[-1] += f": {next(iter(causes))}"
    elif causes:
        parts[-1] += ": " + ", ".join(f"{n} {label}" for label, n in causes.most_common())
    return ", ".join(parts)


def _stray_lines(stray: dict[str, dict[str, int]]) -> list[str]:
    """What each server sent that matched nothing (and was ignored)."""
    lines = []
    for server, counts in stray.items():
        said = []
        if counts.get("invalid_lines"):
            said.append(f"{counts['invalid_lines']} message(s) that are not JSON-RPC")
        if counts.get("unmatched_responses"):
            said.append(f"{counts['unmatched_responses']} response(s) to requests never sent")
        lines.append(f"  server {server} sent {' and '.join(said)}; they were ignored")
    return lines


def _throttled_lines(throttled: dict[str, dict[str, float]]) -> list[str]:
    """Each server that refused calls for now: how often, and how long it paused them."""
    return [
        f"  server {server} throttled: {plural(int(c.get('refused', 0)), 'answer')} of 429/503, "
        f"paused {plural(int(c.get('pauses', 0)), 'time')} ({float(c.get('paused_s', 0)):.1f}s); "
        f"ended at {int(c.get('concurrency', 0))} at a time"
        for server, c in throttled.items()
    ]


def _failure_lines(failed: list[dict[str, Any]], show: str | None) -> list[str]:
    """The failures, those that read the same grouped (the first 20 groups), and the command listing all."""
    groups = group_failures(failed)
    lines = [f"  {format_group(group)}" for group in groups[:20]]
    if len(groups) > 20:
        rest = sum(len(g.items) for g in groups[20:])
        lines.append(f"  ... and {rest} more failures")
    if show and (len(groups) > 20 or any(len(g.items) > 3 for g in groups)):
        lines.append(f"  every failed item: {show}")
    return lines


def render_summary(summary: dict[str, Any], *, show: str | None = None) -> str:
    """The summary's text; ``show``: the command that shows the whole run (it names failures not listed)."""
    steps = summary["steps"]
    items = sum(s["total"] for s in steps.values())
    done = sum(s["succeeded"] for s in steps.values())
    reused = sum(s.get("reused", 0) for s in steps.values())
    reconciled = sum(s.get("reconciled", 0) for s in steps.values())
    parts = _step_counts(steps.values())
    lines = [
        f"{summary['status']}: {plural(len(steps), 'step')} ({parts}); "
        f"{done}/{plural(items, 'call')} done{kept_words(reused, reconciled)} in {summary['duration_s']:.1f}s"
    ]
    lines += _stray_lines(summary.get("stray", {}))
    lines += _throttled_lines(summary.get("throttled", {}))
    outputs_failed = summary.get("outputs_failed", [])
    if outputs_failed:
        lines[0] += f"; {plural(len(outputs_failed), 'output')} failed to render"
    lines += [f"  {line}" for line in _output_failure_lines(summary)]
    lines += _failure_lines(summary["failed"], show)
    return "\n".join(lines)
