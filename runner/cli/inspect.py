"""``mcp-run runs``/``show``/``logs``: looking at runs from their journals alone; no server is contacted.

The commands read a run into plain data (:mod:`runner.cli.runrecord`), render it as text
(:mod:`runner.cli.runtext`) or JSON, and print; ``logs --follow`` follows the journal
(:mod:`runner.cli.journaltail`). ``--engine temporal`` hands over to :mod:`runner.cli.temporal_inspect`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from runner.cli.journaltail import follow
from runner.cli.runrecord import RECORD_VERSION, load, run_record, show_record
from runner.cli.runtext import log_line, render_runs, render_show
from runner.errors import UsageError
from runner.exitcodes import ExitCode
from runner.jsontext import dumps
from runner.protocol.mcp import LOG_LEVELS
from runner.termsafe import terminal

if TYPE_CHECKING:
    from runner.engine.journal.rundir import RunDir

__all__ = [
    "add_commands",
    "add_engine",
    "add_state_dir",
    "add_target",
    "logs_command",
    "run_target",
    "runs_command",
    "show_command",
]


def run_target(args: argparse.Namespace) -> tuple[Path, Path | None, RunDir]:
    """``[WORKFLOW] [RUN_ID]`` of ``show`` and ``logs``: (state directory, workflow, run). A workflow alone
    names its newest run."""
    from runner.cli.where import find_named_run, parse_target, short
    from runner.engine.journal.rundir import resolve_state_dir, runs_of

    workflow, ref = parse_target(args.target, args.run_id)
    state_dir = resolve_state_dir(args.state_dir, workflow)
    if ref is not None:
        return state_dir, workflow, find_named_run(state_dir, ref, workflow)
    assert workflow is not None
    runs = runs_of(state_dir, workflow)
    if not runs:
        raise UsageError(f"no runs of {short(workflow)} in {short(state_dir)}")
    return state_dir, workflow, runs[-1]


def runs_command(args: argparse.Namespace) -> int:
    if args.engine == "temporal":
        from runner.cli.temporal_inspect import runs_temporal

        return runs_temporal(args)
    from runner.cli.where import parse_target
    from runner.engine.journal.rundir import resolve_state_dir

    workflow, _ = parse_target(args.workflow, None) if args.workflow is not None else (None, None)
    if args.workflow is not None and workflow is None:
        raise UsageError(f"no workflow file {args.workflow!r} (`runs` takes a WORKFLOW, not a run id)")
    state_dir = resolve_state_dir(args.state_dir, workflow)
    if args.keep is not None and not args.prune:
        raise UsageError("--keep goes with --prune")
    if args.prune:
        return _prune(args, state_dir, workflow)
    return _list_runs(args, state_dir, workflow)


def _prune(args: argparse.Namespace, state_dir: Path, workflow: Path | None) -> int:
    from runner.engine.journal.listing import prune

    if args.keep is None or args.keep < 0:
        raise UsageError("--prune needs --keep N (N >= 0): how many finished runs to keep")
    removed = prune(state_dir, args.keep, workflow=workflow)
    if args.json:
        print(json.dumps({"removed": removed}, indent=2))
    else:
        print(f"removed {len(removed)} finished run(s)" + "".join(f"\n  {r}" for r in removed))
    return ExitCode.OK


def _list_runs(args: argparse.Namespace, state_dir: Path, workflow: Path | None) -> int:
    from runner.cli.where import short
    from runner.engine.journal.listing import summarize
    from runner.engine.journal.rundir import iter_run_dirs, runs_of

    now = time.time()
    run_dirs = runs_of(state_dir, workflow) if workflow is not None else list(iter_run_dirs(state_dir))
    if args.limit is not None:
        run_dirs = run_dirs[-args.limit :] if args.limit > 0 else []
    records = [run_record(summarize(r), now) for r in run_dirs]
    if args.json:
        print(json.dumps({"version": RECORD_VERSION, "state_dir": str(state_dir), "runs": records}, indent=2))
    elif not records:
        of = f" of {short(workflow)}" if workflow is not None else ""
        hint = "" if workflow is not None else " (runs are kept beside their workflow: mcp-run runs WORKFLOW)"
        print(f"no runs{of} in {short(state_dir)}{hint}", file=sys.stderr)
    else:
        print(terminal(render_runs(records)))
    return ExitCode.OK


def show_command(args: argparse.Namespace) -> int:
    if args.step is not None and args.item is None:
        raise UsageError("--step goes with --item KEY")
    if args.item is not None:
        return _show_item(args)
    if args.engine == "temporal":
        from runner.cli.temporal_inspect import show_temporal

        return show_temporal(args)
    from runner.cli.where import resume_hint, show_hint

    state_dir, _workflow, run_dir = run_target(args)
    run = load(run_dir)
    record = show_record(run, time.time())
    if args.json:
        print(dumps(record, indent=2, default=str))
    else:
        recorded = record["workflow"]
        text = render_show(
            record,
            resume=resume_hint(state_dir, run.run_id, recorded),
            logs_command=show_hint(state_dir, run.run_id, recorded, command="logs"),
        )
        print(terminal(text))  # errors, log messages and keys come from servers
    damaged = run.summary.damaged
    if damaged is not None:
        shown = "shown: what comes before it" if (damaged.line or 0) > 1 else "nothing of the run can be read"
        print(terminal(f"mcp-run: error: {damaged} ({shown})"), file=sys.stderr)
        return ExitCode.USAGE
    return ExitCode.OK


def _show_item(args: argparse.Namespace) -> int:
    from runner.cli.itemshow import item_record, render_item
    from runner.engine.journal.rundir import is_locked

    if args.engine == "temporal":
        raise UsageError(
            "--item reads a local run's journal; on Temporal, see the run with: mcp-run show RUN_ID --engine temporal"
        )
    _state_dir, _workflow, run_dir = run_target(args)
    record = item_record(run_dir, args.item, args.step, live=is_locked(run_dir.path) is not None)
    if args.json:
        print(dumps(record.to_json(), indent=2, default=str))
    else:
        print(terminal(render_item(record)))  # keys, errors and results come from servers
    return ExitCode.OK


def logs_command(args: argparse.Namespace) -> int:
    if args.engine == "temporal":
        from runner.cli.temporal_inspect import logs_temporal

        return logs_temporal(args)
    from runner.engine.journal.rundir import is_locked
    from runner.view.text import level_index

    _state_dir, _workflow, run_dir = run_target(args)
    threshold = level_index(args.level)
    for event in follow(
        run_dir.journal,
        running=lambda: is_locked(run_dir.path) is not None,
        keep_going=args.follow,
        poll=min(max(args.poll, 0.01), 2.0),
    ):
        line = log_line(event, threshold, progress=not args.no_progress_events)
        if line is not None:
            print(terminal(line), flush=args.follow)
    return ExitCode.OK


def add_engine(parser: argparse.ArgumentParser) -> None:
    from runner.cli.temporal import add_connection

    parser.add_argument(
        "--engine",
        choices=("local", "temporal"),
        default="local",
        help="the runs of this engine: the local journals (default), or Temporal's",
    )
    add_connection(parser)


def add_state_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help="where runs are kept (default: $MCP_RUN_STATE_DIR, else .mcp-run beside WORKFLOW when one is "
        "named, else ./.mcp-run)",
    )


TARGET_HELP = """\
  %(command)s RUN_ID             a run of the state directory (--state-dir, $MCP_RUN_STATE_DIR, else ./.mcp-run)
  %(command)s WORKFLOW RUN_ID    a run of WORKFLOW (kept beside it unless --state-dir says otherwise)
  %(command)s WORKFLOW           the newest run of WORKFLOW

RUN_ID may be abbreviated to a unique prefix or suffix (the random part: 3f9a1c). A first argument that is
an existing file (or ends in .yaml, .yml, .json, or holds a /) is the workflow."""


def add_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="WORKFLOW|RUN_ID", help="a workflow file or a run id")
    parser.add_argument("run_id", metavar="RUN_ID", nargs="?", help="a run id (after a WORKFLOW)")


# The commands that take one run: their help, description and examples.
_ONE_RUN: Final[dict[str, tuple[str, str, str]]] = {
    "show": (
        "show one run: steps, failures, in-doubt items, server log",
        "Show a run from its journal: its steps, failures with their error text, the calls in\n"
        "flight or in doubt, the server log messages, and the command that resumes it.",
        "  mcp-run show workflows/convert_docs.yaml\n  mcp-run show 3f9a1c --json\n"
        "  mcp-run show workflows/convert_docs.yaml --item docs/install.md",
    ),
    "logs": (
        "print a run's server log and progress messages",
        "Print the log and progress events of a run's journal; with --follow, keep printing until\nthe run finishes.",
        "  mcp-run logs workflows/convert_docs.yaml --follow",
    ),
}


def _target_parser(
    sub: Any, name: str, exit_help: str, formatter: type[argparse.HelpFormatter]
) -> argparse.ArgumentParser:
    """The parser of a command that takes one run (``show``, ``logs``): its target and its state directory."""
    summary, description, examples = _ONE_RUN[name]
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        usage="%(prog)s [WORKFLOW] RUN_ID [options]\n       %(prog)s WORKFLOW [options]",
        description=description + "\n\n" + TARGET_HELP % {"command": f"mcp-run {name}"},
        epilog=f"examples:\n{examples}\n\n{exit_help}",
        formatter_class=formatter,
    )
    add_target(parser)
    add_state_dir(parser)
    return parser


def add_commands(sub: Any, formatter: type[argparse.HelpFormatter], exit_help: str) -> None:
    runs = sub.add_parser(
        "runs",
        help="list runs",
        usage="%(prog)s [WORKFLOW] [options]",
        description="List runs from their journals, oldest first: those of WORKFLOW (kept beside it unless\n"
        "--state-dir says otherwise), or all those of the state directory ($MCP_RUN_STATE_DIR, else ./.mcp-run).\n\n"
        "STATUS is succeeded or failed for a closed run; in-doubt, incomplete or interrupted for an open one\n"
        "(resume it); running while a process holds the run; damaged when its journal has a line that is not\n"
        "an event (--json says where). RUNNING counts the calls in flight of a running run; IN DOUBT the calls\n"
        "of a run no process holds that were sent without an answer.",
        epilog="examples:\n  mcp-run runs workflows/convert_docs.yaml\n  mcp-run runs --json\n"
        "  mcp-run runs workflows/convert_docs.yaml --prune --keep 20\n\n" + exit_help,
        formatter_class=formatter,
    )
    runs.add_argument("workflow", metavar="WORKFLOW", nargs="?", help="only the runs of this workflow file")
    add_state_dir(runs)
    runs.add_argument("--json", action="store_true", help="print the runs as JSON")
    runs.add_argument("--limit", type=int, metavar="N", help="only the newest N runs")
    runs.add_argument(
        "--prune", action="store_true", help="remove old finished runs (never a running or unfinished one)"
    )
    runs.add_argument("--keep", type=int, metavar="N", help="with --prune: how many finished runs to keep")
    add_engine(runs)
    runs.set_defaults(handler=runs_command)

    show = _target_parser(sub, "show", exit_help, formatter)
    show.add_argument("--json", action="store_true", help="print the run as JSON")
    from runner.cli.itemshow import add_options

    add_options(show)
    add_engine(show)
    show.set_defaults(handler=show_command)

    logs = _target_parser(sub, "logs", exit_help, formatter)
    logs.add_argument("--follow", "-f", action="store_true", help="wait for new events until the run finishes")
    logs.add_argument(
        "--level",
        default="debug",
        choices=LOG_LEVELS,
        help="only log messages at or above this level (default: all)",
    )
    logs.add_argument("--no-progress-events", action="store_true", help="leave out progress events")
    add_engine(logs)
    logs.add_argument("--poll", type=float, default=0.25, metavar="S", help=argparse.SUPPRESS)
    logs.set_defaults(handler=logs_command)
