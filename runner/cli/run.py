"""``mcp-run run``/``resume``/``validate``/``plan``: from a workflow file to a finished (or resumable) run."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.cli.options import add_log_levels
from runner.errors import BusyError, UsageError
from runner.exitcodes import ExitCode, combine

if TYPE_CHECKING:
    from runner.engine.rundir import RunDir, RunLock, WorkflowBusy, WorkflowLock
    from runner.engine.scheduler import Outcome, Prior, Scheduler
    from runner.workflow.plan import Plan

SUMMARY_VERSION = 1

STATE_HELP = """\
Runs are kept in --state-dir, else $MCP_RUN_STATE_DIR, else .mcp-run beside the workflow file (a command
that names no workflow looks in ./.mcp-run). The commands mcp-run prints (resume, runs, show) carry
--state-dir when that rule would not find the run from the current directory.
"""
# Seconds to wait for a run's lock: `runs` and `show` hold it (shared) for an instant to see if a run is live.
RUN_LOCK_WAIT = 0.5
# Seconds to wait for a workflow's lock while its holder is still deciding whether to run (it may decide not
# to: "an unfinished run exists", "nothing to retry"); a holder that runs makes the workflow busy at once.
WORKFLOW_LOCK_WAIT = 30.0

RUN_HELP = (
    """\
Run a workflow: every step a tool call, wired together by ${{ }} templates, journaled so that an
interrupted run can be resumed without calling anything twice.

One run at a time per workflow: a second run of the same workflow while an earlier one is unfinished
(interrupted, or stopped with calls in doubt) is refused with exit 2: add --resume to finish it (or to
start a new run when none is unfinished, so a cron line can always carry --resume), or --new-run to start
over. While another process runs the workflow, any invocation of it exits 6 (busy), whatever its flags.

--retry-failed re-attempts, in the same run, the items and steps of the newest run that failed (or were
skipped because something failed); succeeded items are never called again.

"""
    + STATE_HELP
)

RUN_EXAMPLES = """\
examples:
  mcp-run workflows/convert_docs.yaml
  mcp-run workflows/convert_docs.yaml --input docs=./notes --json
  mcp-run workflows/convert_docs.yaml --resume          # in cron: finish an unfinished run, or start one
  mcp-run workflows/convert_docs.yaml --retry-failed    # re-attempt what failed in the newest run
  mcp-run resume workflows/convert_docs.yaml 3f9a1c --skip-in-doubt
"""

RESUME_HELP = (
    """\
Resume a run from its journal: succeeded items are not called again, items that failed with a definite
answer are, items in doubt wait for --rerun-in-doubt or --skip-in-doubt (unless safe to repeat).

  mcp-run resume RUN_ID             a run of the state directory (--state-dir, $MCP_RUN_STATE_DIR, else
                                    ./.mcp-run)
  mcp-run resume WORKFLOW RUN_ID    a run of WORKFLOW (kept beside it unless --state-dir says otherwise)
  mcp-run resume WORKFLOW           the newest unfinished run of WORKFLOW (never starts a new one)

RUN_ID may be abbreviated to a unique prefix or suffix (the random part: 3f9a1c). A closed run that failed
is reopened only with --retry-failed. A first argument that is an existing file (or ends in .yaml, .yml,
.json, or holds a /) is the workflow.

"""
    + STATE_HELP
)

RESUME_EXAMPLES = """\
examples:
  mcp-run resume 20261129T213512.123456Z-3f9a1c
  mcp-run resume workflows/convert_docs.yaml 3f9a1c --skip-in-doubt
  mcp-run resume workflows/convert_docs.yaml --retry-failed
"""


def _add_workflow_inputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set an input (repeatable); typed by the workflow's inputs section",
    )
    parser.add_argument("--inputs-file", metavar="FILE", help="a YAML or JSON mapping of input values")


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help="where runs are kept (default: $MCP_RUN_STATE_DIR, else .mcp-run beside the workflow)",
    )
    parser.add_argument(
        "--no-journal",
        action="store_true",
        help="do not journal (a throwaway run: cannot resume, takes no lock, so it may overlap another run)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=16, metavar="N", help="at most N calls in flight in all (default: 16)"
    )
    parser.add_argument(
        "--rerun-in-doubt", action="store_true", help="on resume, call again items whose outcome is unknown"
    )
    parser.add_argument(
        "--skip-in-doubt", action="store_true", help="on resume, mark items whose outcome is unknown as failed"
    )
    parser.add_argument(
        "--retry-failed",
        action="store_true",
        help="re-attempt, in the same run, what failed: reopens the newest run (or RUN_ID) if it failed, "
        "resumes it if unfinished; exit 0 if it succeeded (implies resuming)",
    )
    parser.add_argument(
        "--allow-changed",
        action="store_true",
        help="resume even though the workflow or inputs changed: changed steps (and what follows) run afresh",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=10.0,
        metavar="S",
        help="on the first Ctrl-C/SIGTERM, let calls in flight finish for up to S seconds (default: 10)",
    )
    parser.add_argument(
        "--retry-attempts",
        type=int,
        default=5,
        metavar="N",
        help="calls in all for a tool safe to repeat whose outcome was unknown (default: 5)",
    )
    parser.add_argument(
        "--retry-max-time", type=float, default=120.0, metavar="S", help="time bound for those calls (default: 120)"
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=None,
        metavar="S",
        help="bound on starting or reaching a server and its handshake, for servers whose workflow entry sets "
        "no connect_timeout (default: 30)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON summary on stdout at the end")
    parser.add_argument("--output", metavar="FILE", help="write the workflow's outputs as JSON to FILE")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only errors and the final outputs")
    parser.add_argument("--no-progress", action="store_true", help="no live progress display")
    add_log_levels(parser)


def add_commands(sub: Any, formatter: type[argparse.HelpFormatter], exit_help: str) -> None:
    run = sub.add_parser(
        "run",
        help="run a workflow (the default command)",
        description=RUN_HELP,
        epilog=RUN_EXAMPLES + "\n" + exit_help,
        formatter_class=formatter,
    )
    run.add_argument("file", metavar="WORKFLOW", help="the workflow file (YAML)")
    _add_workflow_inputs(run)
    _add_run_options(run)
    run.add_argument("--resume", action="store_true", help="resume the newest unfinished run, else start one")
    run.add_argument("--new-run", action="store_true", help="start a new run even if one is unfinished")
    run.set_defaults(handler=run_command)

    resume = sub.add_parser(
        "resume",
        help="resume a run by id, or a workflow's unfinished run",
        usage="%(prog)s [WORKFLOW] RUN_ID [options]\n       %(prog)s WORKFLOW [options]",
        description=RESUME_HELP,
        epilog=RESUME_EXAMPLES + "\n" + exit_help,
        formatter_class=formatter,
    )
    resume.add_argument("target", metavar="WORKFLOW|RUN_ID", help="a workflow file or a run id")
    resume.add_argument("run_id", metavar="RUN_ID", nargs="?", help="a run id (after a WORKFLOW)")
    _add_workflow_inputs(resume)
    _add_run_options(resume)
    resume.set_defaults(handler=resume_command)

    validate = sub.add_parser(
        "validate",
        help="check a workflow without running it",
        description="Check a workflow without contacting any server: YAML, schema, servers, templates, "
        "references, cycles. Exit code 2 with file:line:column for each problem.",
        epilog=exit_help,
        formatter_class=formatter,
    )
    validate.add_argument("file", metavar="WORKFLOW")
    _add_workflow_inputs(validate)
    validate.set_defaults(handler=validate_command)

    plan = sub.add_parser(
        "plan",
        help="show the steps in order",
        description="Print the DAG: layers, server, tool, fan-out, concurrency and retry safety. With --check, "
        "also connect, list tools, and check that every tool exists and its arguments fit its schema.",
        epilog=exit_help,
        formatter_class=formatter,
    )
    plan.add_argument("file", metavar="WORKFLOW")
    _add_workflow_inputs(plan)
    plan.add_argument("--check", action="store_true", help="connect to the servers and check tools and arguments")
    plan.add_argument(
        "--connect-timeout",
        type=float,
        default=None,
        metavar="S",
        help="with --check: bound on reaching each server and its handshake, for servers that set no "
        "connect_timeout (default: 30)",
    )
    plan.set_defaults(handler=plan_command)


def _load_plan(
    args: argparse.Namespace,
    *,
    require_inputs: bool,
    file: str | None = None,
    base_inputs: dict[str, Any] | None = None,
) -> Plan:
    from runner.workflow.loader import load_inputs_file, validate

    path = file or args.file
    inputs_file = load_inputs_file(args.inputs_file) if getattr(args, "inputs_file", None) else None
    merged = {**(base_inputs or {}), **(inputs_file or {})}
    return validate(path, require_inputs=require_inputs, input_pairs=args.input, inputs_file=merged or None)


def validate_command(args: argparse.Namespace) -> int:
    plan = _load_plan(args, require_inputs=False)
    fan_outs = sum(1 for s in plan.steps.values() if s.fan_out)
    print(
        f"{args.file}: valid: {len(plan.steps)} steps in {len(plan.layers)} layers, "
        f"{len(plan.servers)} servers, {fan_outs} fan-outs"
    )
    return ExitCode.OK


def plan_command(args: argparse.Namespace) -> int:
    from runner.workflow.plan import render_plan_text

    plan = _load_plan(args, require_inputs=False)
    print(render_plan_text(plan))
    if args.check:
        from runner.cli.plancheck import check_plan
        from runner.workflow.plan import DEFAULT_CONNECT_TIMEOUT

        problems = check_plan(plan, connect_timeout=args.connect_timeout or DEFAULT_CONNECT_TIMEOUT)
        for line in problems:
            print(line, file=sys.stderr)
        return ExitCode.USAGE if any(p.startswith("error") for p in problems) else ExitCode.OK
    return ExitCode.OK


def run_command(args: argparse.Namespace) -> int:
    if args.resume and args.new_run:
        raise UsageError("--resume and --new-run contradict each other")
    if args.retry_failed and args.new_run:
        raise UsageError("--retry-failed and --new-run contradict each other: --retry-failed resumes a run")
    return _execute(args, Path(args.file), run_id=None)


def resume_command(args: argparse.Namespace) -> int:
    from runner.cli.where import find_named_run, parse_target
    from runner.engine.rundir import resolve_state_dir

    workflow, ref = parse_target(args.target, args.run_id)
    args.resume = True
    args.new_run = False
    if workflow is not None and ref is None:
        # `resume WORKFLOW`: its newest open run (with --retry-failed, else its newest run); never a new one.
        return _execute(args, workflow, run_id=None, start_new=False)
    assert ref is not None
    state_dir = resolve_state_dir(args.state_dir, workflow)
    run_dir = find_named_run(state_dir, ref, workflow)
    recorded = run_dir.workflow()
    if recorded is None:
        raise UsageError(f"run {run_dir.run_id} has no run_started record; it cannot be resumed")
    args.state_dir = str(state_dir)
    return _execute(args, Path(recorded), run_id=run_dir.run_id)


@dataclass
class _Selection:
    """The run a command continues (None: a new one), or why there is nothing to do (exit 0)."""

    run_dir: RunDir | None = None
    nothing: str | None = None


def _select_run(
    args: argparse.Namespace, state_dir: Path, path: Path, run_id: str | None, *, start_new: bool
) -> _Selection:
    """Which run to continue; call it holding the workflow lock, so that no other process starts or
    continues a run of this workflow between this choice and the run."""
    from runner.cli.where import run_hint, short
    from runner.engine.rundir import find_run, is_locked, runs_of, unfinished_runs

    run_dir: RunDir
    if run_id is not None:
        run_dir = find_run(state_dir, run_id)
    elif args.new_run:
        return _Selection()
    else:
        known = path.is_file()
        unfinished = unfinished_runs(state_dir, path) if known else []
        if unfinished:
            run_dir = unfinished[-1]
            if not args.resume and not args.retry_failed:
                pid = is_locked(run_dir.path)
                status = f"running as process {pid}" if pid else "interrupted or in doubt"
                raise UsageError(
                    f"run {run_dir.run_id} of {short(path)} is unfinished ({status}). Finish it with:\n"
                    f"  {run_hint(state_dir, path, '--resume')}\nor start over with --new-run."
                )
        elif args.retry_failed:
            runs = runs_of(state_dir, path) if known else []
            if not runs:
                raise UsageError(
                    f"no run of {short(path)} in {short(state_dir)} to retry; start one with:\n"
                    f"  {run_hint(state_dir, path)}"
                )
            run_dir = runs[-1]
        elif not start_new:
            runs = runs_of(state_dir, path) if known else []
            if runs and runs[-1].closed_status() == "failed":
                raise UsageError(
                    f"no unfinished run of {short(path)}: its newest run, {runs[-1].run_id}, failed; re-attempt "
                    f"what failed with:\n  {run_hint(state_dir, path, '--retry-failed')}"
                )
            raise UsageError(
                f"no unfinished run of {short(path)} in {short(state_dir)}; start one with:\n"
                f"  {run_hint(state_dir, path)}"
            )
        else:
            return _Selection()
    if args.retry_failed and run_dir.closed_status() == "succeeded":
        return _Selection(nothing=f"run {run_dir.run_id} of {short(path)} succeeded: nothing to retry")
    return _Selection(run_dir)


def _execute(args: argparse.Namespace, path: Path, *, run_id: str | None, start_new: bool = True) -> int:
    if args.rerun_in_doubt and args.skip_in_doubt:
        raise UsageError("--rerun-in-doubt and --skip-in-doubt contradict each other")
    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if args.connect_timeout is not None and not args.connect_timeout > 0:
        raise UsageError("--connect-timeout must be a positive number of seconds")
    if args.no_journal and (args.resume or args.retry_failed):
        raise UsageError("--no-journal cannot resume: there is no journal")
    if args.output:
        folder = Path(args.output).resolve().parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise UsageError(f"--output {args.output}: cannot write in {folder}")
    from runner.engine.rundir import WorkflowBusy, WorkflowLock, resolve_state_dir

    if not path.is_file():  # the loader's error, before any state directory is made beside a typo
        _load_plan(args, require_inputs=False, file=str(path))
        raise UsageError(f"no workflow file {str(path)!r}")
    state_dir = resolve_state_dir(args.state_dir, path)
    if args.no_journal:  # a throwaway run: no journal, no lock
        return _execute_locked(args, path, state_dir, None, None)
    # The workflow lock comes first and stays until the run ends: choosing a run (or none) and running it
    # are one decision that no other process can interleave with.
    try:
        workflow_lock = WorkflowLock(state_dir, path).acquire(wait=WORKFLOW_LOCK_WAIT)
    except WorkflowBusy as exc:
        raise _busy(exc, state_dir, path) from None
    except OSError as exc:
        raise UsageError(f"cannot keep runs in {state_dir}: {exc.strerror or exc}; choose --state-dir") from None
    try:
        selection = _select_run(args, state_dir, path, run_id, start_new=start_new)
        if selection.nothing is not None:
            print(f"mcp-run: {selection.nothing}", file=sys.stderr)
            return ExitCode.OK
        workflow_lock.set_running(selection.run_dir.run_id if selection.run_dir is not None else None)
        return _execute_locked(args, path, state_dir, selection.run_dir, workflow_lock)
    finally:
        workflow_lock.release()


def _busy(exc: WorkflowBusy, state_dir: Path, path: Path) -> BusyError:
    from runner.cli.where import runs_hint, short

    who = f"process {exc.pid}" if exc.pid is not None else "another process"
    what = f" (run {exc.run_id})" if exc.run_id else ""
    return BusyError(
        f"{who} is running workflow {short(path)}{what}; one run at a time per workflow. "
        f"See it with:\n  {runs_hint(state_dir, path)}",
        pid=exc.pid,
    )


def _execute_locked(
    args: argparse.Namespace,
    path: Path,
    state_dir: Path,
    run_dir: RunDir | None,
    workflow_lock: WorkflowLock | None,
) -> int:
    from runner.engine.eventlog import Masker
    from runner.engine.journal import peek_journal
    from runner.engine.runctl import collect_secrets, env_context, fingerprints, restore_env_placeholders, workflow_hash
    from runner.engine.rundir import RunDir

    # A resume takes the run's inputs from its journal (flags still override); secret inputs were never
    # written, so they must be given again.
    base_inputs: dict[str, Any] = {}
    if run_dir is not None:
        first, _last = peek_journal(run_dir.journal)
        recorded = first.get("inputs") if first is not None else None
        if isinstance(recorded, dict):
            base_inputs = {
                name: restore_env_placeholders(value)
                for name, value in recorded.items()
                if value != f"***inputs.{name}***"  # a secret input: never written, must be given again
            }
    plan = _load_plan(args, require_inputs=True, file=str(path), base_inputs=base_inputs)
    inputs = dict(plan.input_values or {})
    env = env_context(plan)
    masker = Masker(collect_secrets(plan, inputs, env))
    fps = fingerprints(plan, inputs)
    wf_hash = workflow_hash(path)
    console = _console(args, masker)
    start = {"fps": fps, "hash": wf_hash, "path": path}

    if args.no_journal:
        return _run(args, plan, inputs, env, masker, console, run_dir=None, lock=None, prior=None)
    assert workflow_lock is not None
    if run_dir is None:
        try:
            run_dir = RunDir.create(state_dir)
        except OSError as exc:
            raise UsageError(f"cannot keep runs in {state_dir}: {exc.strerror or exc}; choose --state-dir") from None
        workflow_lock.set_running(run_dir.run_id)
        lock = run_dir.lock(wait=RUN_LOCK_WAIT)
        console.info(f"run {run_dir.run_id} (journal: {run_dir.journal})")
        return _run(args, plan, inputs, env, masker, console, run_dir=run_dir, lock=lock, prior=None, start=start)
    lock = run_dir.lock(wait=RUN_LOCK_WAIT)
    try:
        prior = _prepare_resume(args, run_dir, plan, inputs, fps, wf_hash, console, masker)
    except BaseException:
        lock.release()
        raise
    if prior is None:
        lock.release()
        return ExitCode.USAGE
    console.info(f"resuming run {run_dir.run_id} (journal: {run_dir.journal})")
    return _run(args, plan, inputs, env, masker, console, run_dir=run_dir, lock=lock, prior=prior, start=start)


def _prepare_resume(
    args: argparse.Namespace,
    run_dir: RunDir,
    plan: Plan,
    inputs: dict[str, Any],
    fps: dict[str, str],
    wf_hash: str,
    console: Console,
    masker: Any,
) -> Prior | None:
    from runner.engine.runctl import changed_steps, describe_changes
    from runner.engine.scheduler import Prior

    state = run_dir.read(keep_results={sid for sid, s in plan.steps.items() if s.referenced}, unmask=masker.unmask)
    missing = [name for name in state.env_names if os.environ.get(name) is None]
    if missing:
        console.error(
            f"run {run_dir.run_id} read the environment variable(s) {', '.join(missing)}, which are not set "
            "now; set them again to resume (their values were never written to the journal)"
        )
        return None
    if state.finished and not (args.retry_failed and state.status == "failed"):
        from runner.cli.where import resume_hint

        again = ""
        if state.status == "failed":
            hint = resume_hint(run_dir.state_dir, run_dir.run_id, state.workflow, "--retry-failed")
            again = f"; re-attempt its failed items with:\n  {hint}"
        console.error(f"run {run_dir.run_id} already finished ({state.status}); nothing to resume{again}")
        return None
    secret = {name for name, spec in plan.workflow.inputs.items() if spec.secret}
    changes = describe_changes(state, wf_hash, fps, inputs, secret)
    fresh: set[str] = set()
    if changes:
        if not args.allow_changed:
            console.error(
                f"run {run_dir.run_id} cannot be resumed as is:\n  - "
                + "\n  - ".join(changes)
                + "\nRun with --allow-changed to re-run the changed steps (and what depends on them), "
                "or with --new-run to start over."
            )
            return None
        fresh = changed_steps(state.fingerprints, fps)
    mode = "rerun" if args.rerun_in_doubt else "skip" if args.skip_in_doubt else "ask"
    return Prior(state=state, in_doubt=mode, fresh_steps=fresh)


class Console:
    """What the run prints on stderr (progress, warnings, errors); masked, filtered by --quiet."""

    def __init__(self, quiet: bool, masker: Any) -> None:
        self.quiet = quiet
        self._masker = masker

    def info(self, text: str) -> None:
        if not self.quiet:
            print(self._masker.mask(text), file=sys.stderr, flush=True)

    def warn(self, text: str) -> None:
        if not self.quiet:
            print("mcp-run: warning: " + self._masker.mask(text), file=sys.stderr, flush=True)

    def error(self, text: str) -> None:
        print("mcp-run: " + self._masker.mask(text), file=sys.stderr, flush=True)


def _console(args: argparse.Namespace, masker: Any) -> Console:
    return Console(args.quiet, masker)


def _run(
    args: argparse.Namespace,
    plan: Plan,
    inputs: dict[str, Any],
    env: dict[str, Any],
    masker: Any,
    console: Console,
    *,
    run_dir: RunDir | None,
    lock: RunLock | None,
    prior: Prior | None,
    start: dict[str, Any] | None = None,
) -> int:
    import trio

    from runner.engine.eventlog import EventLog
    from runner.engine.journal import CLOSED_STATUSES
    from runner.engine.retry import RetryPolicy
    from runner.engine.runctl import make_opener
    from runner.engine.scheduler import Scheduler, SchedulerOptions
    from runner.view.plain import make_view
    from runner.workflow.plan import DEFAULT_CONNECT_TIMEOUT

    retry = RetryPolicy(attempts=max(1, args.retry_attempts), total=args.retry_max_time)
    connect_timeout = args.connect_timeout if args.connect_timeout is not None else DEFAULT_CONNECT_TIMEOUT
    fd: int | None = None
    if run_dir is not None:
        if prior is not None:
            fd = run_dir.open_for_append()
        else:
            fd = os.open(run_dir.journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    log = EventLog(fd, masker=masker, start_seq=prior.state.last_seq if prior is not None else 0)
    view = make_view(args, plan.order, sys.stderr)
    log.subscribe(view.observe)
    scheduler = Scheduler(
        plan,
        inputs=inputs,
        env=env,
        opener=make_opener(plan, inputs, env),
        log=log,
        options=SchedulerOptions(
            concurrency=args.concurrency,
            retry=retry,
            server_log_level=args.server_log_level,
            connect_timeout=connect_timeout,
        ),
        prior=prior,
        on_warning=console.warn,
    )
    signals: list[int] = []
    started = time.monotonic()
    # Secret inputs are written as their placeholder whatever their type (masking covers strings only).
    public_inputs = {
        name: f"***inputs.{name}***" if plan.workflow.inputs[name].secret else value for name, value in inputs.items()
    }
    workflow_path = str(Path(start["path"]).resolve()) if start else None

    async def main() -> Outcome:
        async with trio.open_nursery() as outer:
            await outer.start(log.run)
            if prior is None:
                assert start is not None or run_dir is None
                await log.commit(
                    "run_started",
                    run_id=run_dir.run_id if run_dir else None,
                    workflow=workflow_path,
                    workflow_hash=start["hash"] if start else None,
                    inputs=public_inputs,
                    fingerprints=start["fps"] if start else {},
                    env=sorted(name for name, value in env.items() if value is not None),
                    pid=os.getpid(),
                )
            else:
                await log.commit(
                    "run_resumed",
                    pid=os.getpid(),
                    fingerprints=start["fps"] if start else {},
                    allow_changed=bool(args.allow_changed),
                    retry_failed=bool(args.retry_failed),
                )
            watcher = trio.CancelScope()

            async def watch() -> None:
                with watcher:
                    await _watch_signals(scheduler, args.grace, signals, console)

            outer.start_soon(watch)
            async with trio.open_nursery() as inner:
                inner.start_soon(view.run)
                outcome = await scheduler.run()
                view.close()
            code = outcome.exit_code
            if signals:
                code = combine([code, ExitCode.SIGINT if signals[0] == signal.SIGINT else ExitCode.SIGTERM])
                outcome.exit_code = code
            if outcome.blocked:
                # Nothing ran: the run stays open, in doubt until decided (`runs` must say so).
                log.record("run_stopped", status=outcome.status, exit_code=int(code), outputs={})
            else:
                # Closed only with a definite answer for every item; otherwise the run stays open.
                if outcome.status == "interrupted":
                    log.record("run_interrupted", status=outcome.status, exit_code=int(code))
                else:
                    log.record(
                        "run_finished" if outcome.status in CLOSED_STATUSES else "run_stopped",
                        status=outcome.status,
                        exit_code=int(code),
                        outputs=outcome.outputs,
                    )
            # Stop listening for signals, let the writer flush and fsync what is left, and return.
            watcher.cancel()
            log.close()
        return outcome

    from runner._trio import single_error
    from runner.engine.eventlog import JournalWriteError

    try:
        try:
            with single_error():
                outcome = trio.run(main)
        except* JournalWriteError as group:
            first = group.exceptions[0]
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            where = f" ({run_dir.journal})" if run_dir is not None else ""
            resume = f"; when it can be written again: {_resume_hint(run_dir, plan)}" if run_dir else ""
            raise JournalWriteError(f"{first}{where}; the run stopped, calls in flight are in doubt{resume}") from None
    finally:
        if fd is not None:
            os.close(fd)
        if lock is not None:
            lock.release()
    return _report(args, plan, outcome, run_dir, time.monotonic() - started, console, masker)


async def _watch_signals(scheduler: Scheduler, grace: float, signals: list[int], console: Console) -> None:
    import trio

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as receiver:
        async for signum in receiver:
            signals.append(signum)
            if len(signals) == 1:
                console.error(
                    f"interrupted: dispatching nothing new; calls in flight have {grace:g} s to finish "
                    "(interrupt again to cancel them now)"
                )
                scheduler.drain()

                async def after_grace() -> None:
                    await trio.sleep(grace)
                    scheduler.cancel()

                trio.lowlevel.spawn_system_task(after_grace)
            elif len(signals) == 2:
                console.error("interrupted again: cancelling calls in flight")
                scheduler.cancel()
            else:
                os._exit(130 if signals[0] == signal.SIGINT else 143)


def _report(
    args: argparse.Namespace,
    plan: Plan,
    outcome: Outcome,
    run_dir: RunDir | None,
    duration: float,
    console: Console,
    masker: Any,
) -> int:
    summary = build_summary(plan, outcome, run_dir, duration)
    if args.output:
        Path(args.output).write_text(masker.mask(json.dumps(outcome.outputs, indent=2, ensure_ascii=False)) + "\n")
    if args.json:
        print(masker.mask(json.dumps(summary, indent=2, ensure_ascii=False)))
    else:
        if not args.quiet:
            show = _show_hint(run_dir, plan) if run_dir is not None else None
            console.info(render_summary(summary, show=show))
        if outcome.outputs:
            print(masker.mask(json.dumps(outcome.outputs, indent=2, ensure_ascii=False)))
    if outcome.blocked or outcome.in_doubt:
        from runner.view.plain import where

        rows = "\n".join(
            f"  {where(d['step'], d.get('item'), 40)}: {d.get('kind')}"
            + (f", dispatched {d['dispatched_at']}" if d.get("dispatched_at") else "")
            for d in outcome.in_doubt[:50]
        )
        more = ""
        if len(outcome.in_doubt) > 50:
            more = f"\n  ... and {len(outcome.in_doubt) - 50} more"
            more += f" ({_show_hint(run_dir, plan)})" if run_dir is not None else ""
        if run_dir is not None:
            decide = (
                "Check them on the server, then resume with one of:\n"
                f"  {_resume_hint(run_dir, plan, '--rerun-in-doubt')}    # call them again\n"
                f"  {_resume_hint(run_dir, plan, '--skip-in-doubt')}     # mark them failed" + _secret_note(plan)
            )
        else:
            decide = "Check them on the server (a run without a journal cannot be resumed)."
        console.error(f"{len(outcome.in_doubt)} call(s) may or may not have happened:\n{rows}{more}\n{decide}")
    if outcome.status == "interrupted" and run_dir is not None:
        console.error(f"run interrupted; resume it with:\n  {_resume_hint(run_dir, plan)}{_secret_note(plan)}")
    elif outcome.status == "incomplete" and run_dir is not None:
        console.error(
            f"run {run_dir.run_id} is incomplete and stays open; resume it with:\n"
            f"  {_resume_hint(run_dir, plan)}{_secret_note(plan)}"
        )
    return int(outcome.exit_code)


def _resume_hint(run_dir: RunDir, plan: Plan, *flags: str) -> str:
    """``mcp-run resume WORKFLOW RUN_ID [--state-dir DIR] FLAGS``: works pasted into the same shell."""
    from runner.cli.where import resume_hint

    return resume_hint(run_dir.state_dir, run_dir.run_id, plan.file, *flags)


def _show_hint(run_dir: RunDir, plan: Plan) -> str:
    from runner.cli.where import show_hint

    return show_hint(run_dir.state_dir, run_dir.run_id, plan.file)


def _secret_note(plan: Plan) -> str:
    secret = sorted(name for name, spec in plan.workflow.inputs.items() if spec.secret)
    if not secret:
        return ""
    return "\n(secret inputs are never journaled: add " + " ".join(f"--input {n}=..." for n in secret) + ")"


def build_summary(plan: Plan, outcome: Outcome, run_dir: RunDir | None, duration: float) -> dict[str, Any]:
    return {
        "version": SUMMARY_VERSION,
        "run_id": run_dir.run_id if run_dir else None,
        "workflow": plan.file,
        "status": outcome.status,
        "exit_code": int(outcome.exit_code),
        "duration_s": round(duration, 3),
        "steps": {
            sid: {"status": r.status, **({"reason": r.reason} if r.reason else {}), **r.counts()}
            for sid, r in outcome.steps.items()
        },
        "outputs": outcome.outputs,
        "failed": outcome.failures,
        "in_doubt": outcome.in_doubt,
        "stray": outcome.stray,
    }


def render_summary(summary: dict[str, Any], *, show: str | None = None) -> str:
    """The summary's text; ``show``: the command that shows the whole run (it names failures not listed)."""
    steps = summary["steps"]
    by_status: dict[str, int] = {}
    for s in steps.values():
        by_status[s["status"]] = by_status.get(s["status"], 0) + 1
    items = sum(s["total"] for s in steps.values())
    done = sum(s["succeeded"] for s in steps.values())
    parts = ", ".join(f"{n} {status}" for status, n in sorted(by_status.items()))
    lines = [
        f"{summary['status']}: {len(steps)} step{'s' if len(steps) != 1 else ''} ({parts}); "
        f"{done}/{items} calls done in {summary['duration_s']:.1f}s"
    ]
    from runner.view.plain import format_group, group_failures

    for server, counts in summary.get("stray", {}).items():
        said = []
        if counts.get("invalid_lines"):
            said.append(f"{counts['invalid_lines']} message(s) that are not JSON-RPC")
        if counts.get("unmatched_responses"):
            said.append(f"{counts['unmatched_responses']} response(s) to requests never sent")
        lines.append(f"  server {server} sent {' and '.join(said)}; they were ignored")

    groups = group_failures(summary["failed"])
    lines += [f"  {format_group(group)}" for group in groups[:20]]
    if len(groups) > 20:
        rest = sum(len(g.items) for g in groups[20:])
        lines.append(f"  ... and {rest} more failures")
    if show and (len(groups) > 20 or any(len(g.items) > 3 for g in groups)):
        lines.append(f"  every failed item: {show}")
    return "\n".join(lines)
