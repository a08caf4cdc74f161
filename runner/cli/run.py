"""``mcp-run run``/``resume``/``validate``/``plan``: from a workflow file to a finished (or resumable) run."""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.cli.options import (
    add_elicitation,
    add_log_levels,
    add_max_message_size,
    add_no_cache,
    add_protocol_version,
)
from runner.cli.temporal import add_engine_options
from runner.errors import McpRunError, UsageError, WorkflowError
from runner.exitcodes import ExitCode
from runner.termsafe import terminal
from runner.words import plural

if TYPE_CHECKING:
    from runner.engine.core.state import RunState
    from runner.engine.options import RunOptions, Watcher
    from runner.workflow.plan import Plan

STATE_HELP = """\
Runs are kept in --state-dir, else $MCP_RUN_STATE_DIR, else .mcp-run beside the workflow file (a command
that names no workflow looks in ./.mcp-run). The commands mcp-run prints (resume, runs, show) carry
--state-dir when that rule would not find the run from the current directory.
"""
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
  mcp-run workflows/convert_docs.yaml --input source=./notes --json
  mcp-run workflows/convert_docs.yaml --resume          # in cron: finish an unfinished run, or start one
  mcp-run workflows/convert_docs.yaml --retry-failed    # re-attempt what failed in the newest run
  mcp-run resume workflows/convert_docs.yaml 3f9a1c --skip-in-doubt
"""

RESUME_HELP = (
    """\
Resume a run from its journal: succeeded items are not called again, items that failed with a definite
answer are, items in doubt wait for a decision (unless safe to repeat): --rerun-in-doubt (call them again),
--skip-in-doubt (never call them: they count as failed) or --accept-in-doubt (they happened: they count as
succeeded, with no result). A decision is journaled before it acts and settles only the items in doubt then;
a later decision never undoes it.

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


RESUME_USAGE = "%(prog)s [WORKFLOW] RUN_ID [options]\n       %(prog)s WORKFLOW [options]"
VALIDATE_HELP = (
    "Check a workflow without contacting any server: YAML, schema, servers, templates, references, cycles. Exit "
    "code 2 with file:line:column for each problem. A stdio server's program and working directory given relative "
    "to the workflow must exist; a program not found on PATH here is only a warning."
)
PLAN_HELP = (
    "Print the DAG: layers, server, tool, fan-out, concurrency and retry safety. With --check, also connect, list "
    "tools, and check that every tool exists and its arguments fit its schema."
)


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
        "--skip-in-doubt",
        action="store_true",
        help="on resume, never call again items whose outcome is unknown: they count as failed",
    )
    parser.add_argument(
        "--accept-in-doubt",
        action="store_true",
        help="on resume, record items whose outcome is unknown as done (you checked: the call happened): they "
        "count as succeeded, with no result, and the steps after them run",
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
    add_no_cache(parser)
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
    add_max_message_size(parser)
    add_protocol_version(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON summary on stdout at the end")
    parser.add_argument("--output", metavar="FILE", help="write the workflow's outputs as JSON to FILE")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only errors and the final outputs")
    parser.add_argument("--no-progress", action="store_true", help="no live progress display")
    add_log_levels(parser)
    add_elicitation(parser)


def add_commands(sub: Any, formatter: type[argparse.HelpFormatter], exit_help: str) -> None:
    def command(name: str, help: str, description: str, epilog: str, **more: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(
            name, help=help, description=description, epilog=epilog, formatter_class=formatter, **more
        )
        return parser

    run = command("run", "run a workflow (the default command)", RUN_HELP, RUN_EXAMPLES + "\n" + exit_help)
    run.add_argument("file", metavar="WORKFLOW", help="the workflow file (YAML)")
    _add_workflow_inputs(run)
    _add_run_options(run)
    run.add_argument("--resume", action="store_true", help="resume the newest unfinished run, else start one")
    run.add_argument("--new-run", action="store_true", help="start a new run even if one is unfinished")
    add_engine_options(run)
    run.set_defaults(handler=run_command)

    resume = command(
        "resume", "resume a run by id, or a workflow's unfinished run", RESUME_HELP,
        RESUME_EXAMPLES + "\n" + exit_help, usage=RESUME_USAGE,
    )  # fmt: skip
    resume.add_argument("target", metavar="WORKFLOW|RUN_ID", help="a workflow file or a run id")
    resume.add_argument("run_id", metavar="RUN_ID", nargs="?", help="a run id (after a WORKFLOW)")
    _add_workflow_inputs(resume)
    _add_run_options(resume)
    add_engine_options(resume)
    resume.set_defaults(handler=resume_command)

    validate = command("validate", "check a workflow without running it", VALIDATE_HELP, exit_help)
    validate.add_argument("file", metavar="WORKFLOW")
    _add_workflow_inputs(validate)
    validate.add_argument(
        "--json", action="store_true", help="print one JSON report on stdout: ok, errors (schemas/validate.schema.json)"
    )
    validate.set_defaults(handler=validate_command)

    plan = command("plan", "show the steps in order", PLAN_HELP, exit_help)
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


def _load_plan(args: argparse.Namespace, *, require_inputs: bool) -> Plan:
    from runner.workflow.loader import load_inputs_file, validate

    inputs_file = load_inputs_file(args.inputs_file) if getattr(args, "inputs_file", None) else None
    return validate(args.file, require_inputs=require_inputs, input_pairs=args.input, inputs_file=inputs_file)


def validate_command(args: argparse.Namespace) -> int:
    from runner.cli.launches import check_launches
    from runner.workflow.positions import raise_errors

    try:
        plan = _load_plan(args, require_inputs=False)
        _servers, errors, warnings = check_launches(plan)
        raise_errors(errors)
    except McpRunError as exc:
        if not args.json:
            raise
        return validate_refused(args.file, exc)
    for warning in warnings:
        print(f"mcp-run: warning: {terminal(str(warning))}", file=sys.stderr)
    fan_outs = sum(1 for s in plan.steps.values() if s.fan_out)
    if args.json:
        from runner.jsontext import dumps
        from runner.schemas import ValidateReport

        report = ValidateReport(
            version=1, ok=True, file=args.file, warnings=[str(w) for w in warnings], steps=len(plan.steps),
            layers=len(plan.layers), servers=len(plan.servers), fan_outs=fan_outs,
        )  # fmt: skip
        print(dumps(report.model_dump(), indent=2))
        return ExitCode.OK
    print(
        f"{terminal(args.file)}: valid: {plural(len(plan.steps), 'step')} in {plural(len(plan.layers), 'layer')}, "
        f"{plural(len(plan.servers), 'server')}, {plural(fan_outs, 'fan-out')}"
    )
    return ExitCode.OK


def validate_refused(file: str, exc: McpRunError) -> int:
    """``validate --json`` that finds a problem (an invalid workflow or input, a usage error, a command line
    argparse refused): the message on stderr, the report (``ok: false``, each problem located as the error
    locates it) on stdout; the error's exit code."""
    from runner.jsontext import dumps
    from runner.schemas import Problem, ValidateReport

    print(f"mcp-run: error: {terminal(str(exc))}", file=sys.stderr)
    located = getattr(exc, "errors", None) or ([exc] if isinstance(exc, WorkflowError) else [])
    problems = [Problem.model_validate(e, from_attributes=True) for e in located] or [
        Problem.model_validate({"message": str(exc)})
    ]
    print(dumps(ValidateReport(version=1, ok=False, file=file, errors=problems).model_dump(), indent=2))
    return int(exc.exit_code)


def validate_target(words: list[str]) -> str:
    """The workflow that ``validate``'s arguments ``words`` name ("" when none), read leniently, as the report of
    a command line that argparse refused can still say which file it was about."""
    lenient = _Lenient(add_help=False)
    lenient.add_argument("file", nargs="?", default="")
    _add_workflow_inputs(lenient)
    try:
        named, _rest = lenient.parse_known_args(words)
    except UsageError:  # an option without its value, at the end: what comes before it may name the file
        return validate_target(words[:-1]) if words else ""
    return str(named.file)


class _Lenient(argparse.ArgumentParser):
    """A parser that raises what it cannot read instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def plan_command(args: argparse.Namespace) -> int:
    from runner.cli.launches import check_launches, launch_lines
    from runner.workflow.plantext import render_plan_text
    from runner.workflow.positions import raise_errors

    plan = _load_plan(args, require_inputs=False)
    servers, errors, _warnings = check_launches(plan)  # a warning shows in the plan as "cannot start here"
    raise_errors(errors)
    print(terminal(render_plan_text(plan, launch_lines(servers))))  # a shared workflow's text is not ours
    if args.check:
        from runner.cli.plancheck import check_plan

        problems = check_plan(plan, connect_timeout=args.connect_timeout)  # None: each server's, else 30 s
        for line in problems:
            print(terminal(line), file=sys.stderr)  # tool names and schema messages come from servers
        return ExitCode.USAGE if any(p.startswith("error") for p in problems) else ExitCode.OK
    return ExitCode.OK


def run_command(args: argparse.Namespace) -> int:
    if args.engine == "temporal":
        from runner.cli.temporal import run_temporal

        return run_temporal(args, _options(args))
    return _execute(args, Path(args.file), _options(args))


def resume_command(args: argparse.Namespace) -> int:
    from runner.cli.where import find_named_run, parse_target
    from runner.engine.journal.rundir import resolve_state_dir

    if args.engine == "temporal":
        from runner.cli.temporal import resume_temporal

        return resume_temporal(args)
    workflow, ref = parse_target(args.target, args.run_id)
    if workflow is not None and ref is None:
        # `resume WORKFLOW`: its newest open run (with --retry-failed, else its newest run); never a new one.
        return _execute(args, workflow, _options(args, resume=True, start_new=False))
    assert ref is not None
    state_dir = resolve_state_dir(args.state_dir, workflow)
    run_dir = find_named_run(state_dir, ref, workflow)
    recorded = run_dir.workflow()
    if recorded is None:
        from runner.cli.report import damaged_advice
        from runner.engine.core.resume import RunDamaged

        damage = run_dir.damage()
        if damage is not None:
            refusal = RunDamaged(run_dir.run_id, str(damage), first=True)
            raise damaged_advice(refusal, state_dir=state_dir, workflow=None)
        raise UsageError(f"run {run_dir.run_id} has no record yet (it died writing its first); it cannot be resumed")
    options = _options(args, resume=True, run_id=run_dir.run_id, state_dir=str(state_dir))
    return _execute(args, workflow or _started_from(Path(recorded), state_dir, run_dir.run_id), options)


def _started_from(recorded: Path, state_dir: Path, run_id: str) -> Path:
    """The workflow file of run ``run_id``, which was started from ``recorded``: that file, or, when it is gone
    (its folder was moved, with the runs beside it), the file of that name beside the state directory."""
    if recorded.is_file():
        return recorded
    beside = state_dir.resolve().parent / recorded.name
    if state_dir.name == ".mcp-run" and beside.is_file():
        return beside
    raise UsageError(
        f"run {run_id} was started from {recorded}, which is not there now; name the workflow (moved, or in a "
        f"new release directory): mcp-run resume WORKFLOW {run_id}"
    )


def _options(args: argparse.Namespace, **overrides: Any) -> RunOptions:
    """The run's options, typed, built once from the command line (nothing below sees ``args``)."""
    from runner.cli.where import in_doubt_decision
    from runner.engine.options import RunOptions

    in_doubt = in_doubt_decision(args)
    fields: dict[str, Any] = {
        "input_pairs": tuple(args.input),
        "inputs_file": args.inputs_file,
        "state_dir": args.state_dir,
        "resume": bool(getattr(args, "resume", False)),
        "new_run": bool(getattr(args, "new_run", False)),
        "retry_failed": args.retry_failed,
        "in_doubt": in_doubt,
        "allow_changed": args.allow_changed,
        "no_cache": bool(getattr(args, "no_cache", False)),
        "journal": not args.no_journal,
        "concurrency": args.concurrency,
        "retry_attempts": args.retry_attempts,
        "retry_max_time": args.retry_max_time,
        "connect_timeout": args.connect_timeout,
        "max_message_size": args.max_message_size,
        "server_log_level": args.server_log_level,
        "elicitation": args.elicitation,
        "protocol": args.protocol_version,
        "grace": args.grace,
        "watch_signals": True,
    }
    options = RunOptions(**{**fields, **overrides})
    options.check()
    return options


def _execute(args: argparse.Namespace, path: Path, options: RunOptions) -> int:
    """Run, then report; a refusal of the library is explained with the command that does what was meant."""
    import trio

    from runner.cli.report import Console, ReportOptions, explain, report
    from runner.engine.journal.rundir import resolve_state_dir
    from runner.engine.preflight import check_output
    from runner.engine.run import execute
    from runner.view.plain import ViewOptions, make_view

    if args.output:  # before the first call: outputs with nowhere to go are found out now, not after the run
        check_output(Path(args.output), workflow=path, inputs_file=options.inputs_file)
    state_dir = resolve_state_dir(str(options.state_dir) if options.state_dir else None, path)
    console = Console(args.quiet)
    view = ViewOptions(quiet=args.quiet, progress=not args.no_progress, log_level=args.log_level)

    def watcher(plan: Plan, state: RunState) -> Watcher:
        return make_view(view, plan.order, state, sys.stderr)

    # What start-up made (modules, classes, the parsers) lives until the process ends: out of the collector's
    # way, the collector's full passes need not walk it (in a 20,000-item fan-out, that saved ~0.08 s of 4 s).
    gc.freeze()
    try:
        outcome = trio.run(lambda: execute(path, options, reporter=console, watcher=watcher))
    except McpRunError as exc:
        raise explain(exc, state_dir=state_dir, workflow=path) from None
    console.masker = outcome.masker  # the end of the run prints its outputs: masked like everything else
    report_options = ReportOptions(json=args.json, output=args.output, quiet=args.quiet)
    code = report(outcome, report_options, console, state_dir=state_dir if options.journal else None)
    if options.journal:
        from runner.cli.reporting import append_step_summary

        append_step_summary(outcome.run_dir, state_dir, console.warn)  # a GitHub Actions job's summary, when set
    return code
