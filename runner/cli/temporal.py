"""The Temporal commands: ``temporal-dev``, ``worker --engine temporal``, and ``run --engine temporal``.

The run's lifecycle is the Temporal engine's (:mod:`runner.temporal.engine`, chosen by
:func:`runner.api.engine_named`); here it is only parsed, followed on screen and reported, its refusals
given the commands to paste. ``runner.temporal`` (and ``temporalio``) are imported only inside the commands
that need them: the base install runs without the ``temporal`` extra.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec

from runner.engines import (
    DEFAULT_ADDRESS,
    DEFAULT_TASK_QUEUE,
    ENGINES,
    TemporalOptions,
    need_temporal,
    refuse_unsupported,
)
from runner.errors import BusyError, McpRunError, OpenRunChanged, RunAlreadyOpen, UsageError
from runner.exitcodes import ExitCode
from runner.termsafe import terminal

P = ParamSpec("P")

if TYPE_CHECKING:
    from runner.cli.report import Console
    from runner.engine.options import RunOptions
    from runner.temporal.engine import Started, TemporalEngine


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """``--engine`` and the options of a run on Temporal (defaults: :class:`~runner.engines.TemporalOptions`)."""
    add_engine(parser, help="where the run happens: here (default), or on Temporal's workers (`mcp-run worker`)")
    default = TemporalOptions()
    on = "with --engine temporal:"
    parser.add_argument("--detach", action="store_true", help=f"{on} start the run and return at once")
    batch = f"{on} items per call activity (default: sized by the fan-out, 100 to 500)"
    parser.add_argument("--batch-size", type=int, default=default.batch_size, metavar="N", help=batch)
    silent = f"{on} a worker silent this long is taken for dead (default: {default.heartbeat_timeout:g})"
    parser.add_argument("--heartbeat-timeout", type=float, default=default.heartbeat_timeout, metavar="S", help=silent)


def add_engine(parser: argparse.ArgumentParser, *, help: str) -> None:
    """``--engine`` (one of :data:`runner.engines.ENGINES`, local by default) and Temporal's connection options:
    what every command that reads either engine's runs takes."""
    parser.add_argument("--engine", choices=ENGINES, default="local", help=help)
    add_connection(parser)


def add_connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--temporal-address",
        default=DEFAULT_ADDRESS,
        metavar="HOST:PORT",
        help=f"Temporal's frontend (default: {DEFAULT_ADDRESS})",
    )
    parser.add_argument(
        "--task-queue",
        default=DEFAULT_TASK_QUEUE,
        metavar="NAME",
        help=f"the task queue (default: {DEFAULT_TASK_QUEUE})",
    )


def add_commands(sub: Any, formatter: type[argparse.HelpFormatter], exit_help: str) -> None:
    dev = sub.add_parser(
        "temporal-dev",
        help="start Temporal's dev server (the temporal extra)",
        description="Start Temporal's dev server on loopback, its state kept under the state directory "
        "(--state-dir, else $MCP_RUN_STATE_DIR, else ./.mcp-run) with SQLite in WAL mode and synchronous=normal.",
        epilog=exit_help,
        formatter_class=formatter,
    )
    dev.add_argument("--port", type=int, default=7233, help="the frontend's port (default: 7233)")
    dev.add_argument("--state-dir", metavar="DIR", help="where the server's database is kept")
    dev.set_defaults(handler=temporal_dev_command)

    _command(
        sub, "worker", formatter, exit_help, worker_command,
        help="serve runs of an engine (--engine temporal)",
        description="A worker of Temporal runs: hosts the workflow and the tool-call activities on a task queue. "
        "Run any number of them, on any machines that can start the workflows' servers.",
    )  # fmt: skip
    _command(
        sub, "cancel", formatter, exit_help, cancel_command, run_id=True,
        help="cancel a run (--engine temporal)",
        description="Ask Temporal to cancel a run: calls not yet sent are not sent; calls in flight may finish.",
    )  # fmt: skip
    export = _command(
        sub, "export", formatter, exit_help, export_command, run_id=True,
        help="write a run's events as a journal (--engine temporal)",
        description="Write a run's events as journal lines (the schema of schemas/journal-event.schema.json).",
    )  # fmt: skip
    export.add_argument("--output", "-o", metavar="FILE", help="write there (default: stdout)")


def _command(
    sub: Any,
    name: str,
    formatter: type[argparse.HelpFormatter],
    exit_help: str,
    handler: Any,
    *,
    help: str,
    description: str,
    run_id: bool = False,
) -> argparse.ArgumentParser:
    """A command of the Temporal engine only: ``[RUN_ID]``, ``--engine temporal`` (required) and the
    connection options."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=description, epilog=exit_help, formatter_class=formatter
    )
    if run_id:
        parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("--engine", choices=("temporal",), required=True, help="the engine (temporal)")
    add_connection(parser)
    parser.set_defaults(handler=handler)
    return parser


def leaves_by_exit(handler: Callable[P, int]) -> Callable[P, int]:
    """Every Temporal command leaves through here: an error is reported as :func:`runner.cli.main` reports
    it, Ctrl-C exits 130, and the process then leaves by :func:`_exit` with the code, whatever the path."""

    @functools.wraps(handler)
    def run(*given: P.args, **named: P.kwargs) -> int:
        args = given[0] if given else named["args"]
        try:
            code = handler(*given, **named)
        except McpRunError as exc:
            from runner.cli import report_error

            code = report_error(exc, json=getattr(args, "json", False))
        except KeyboardInterrupt:
            print("mcp-run: interrupted", file=sys.stderr)
            code = ExitCode.SIGINT
        except BrokenPipeError:
            code = ExitCode.OK
        return _exit(code)

    return run


@leaves_by_exit
def temporal_dev_command(args: argparse.Namespace) -> int:
    from runner.engine.journal.rundir import resolve_state_dir
    from runner.temporal.devserver import dev_server_argv, find_temporal, prepare_state

    state_dir = resolve_state_dir(args.state_dir, None).resolve()
    prepare_state(state_dir)
    argv = dev_server_argv(find_temporal(), port=args.port, state_dir=state_dir)
    print(f"mcp-run: Temporal dev server on 127.0.0.1:{args.port} (state: {argv[argv.index('--db-filename') + 1]})",
          file=sys.stderr, flush=True)  # fmt: skip
    os.execv(argv[0], argv)  # the server is the process from here: Ctrl-C stops it
    return ExitCode.OK  # pragma: no cover


@leaves_by_exit
def worker_command(args: argparse.Namespace) -> int:
    need_temporal()
    import asyncio

    from runner.temporal.worker import serve

    def ready() -> None:
        print(
            f"mcp-run: worker on task queue {args.task_queue!r} of {args.temporal_address}", file=sys.stderr, flush=True
        )

    try:
        asyncio.run(serve(args.temporal_address, args.task_queue, ready=ready))
    except KeyboardInterrupt:
        print("mcp-run: worker stopped", file=sys.stderr)
        return ExitCode.SIGINT
    print("mcp-run: worker stopped (SIGTERM)", file=sys.stderr)
    return ExitCode.SIGTERM


@leaves_by_exit
def cancel_command(args: argparse.Namespace) -> int:
    need_temporal()
    import asyncio

    from runner.temporal.client import cancel, connect

    async def main() -> None:
        await cancel(await connect(args.temporal_address), args.run_id)

    asyncio.run(main())
    print(f"mcp-run: cancel requested for run {terminal(args.run_id)}", file=sys.stderr)
    return ExitCode.OK


@leaves_by_exit
def export_command(args: argparse.Namespace) -> int:
    need_temporal()
    import asyncio

    from runner.jsontext import dumps
    from runner.temporal.client import connect
    from runner.temporal.history import run_events as events_of

    async def main() -> list[dict[str, Any]]:
        return await events_of(await connect(args.temporal_address), args.run_id)

    text = "".join(dumps(obj) + "\n" for obj in asyncio.run(main()))
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return ExitCode.OK


def engine_args(args: argparse.Namespace) -> list[str]:
    """``--engine temporal`` and the address when it is not the default: what a hint's command needs (the
    hints are made by :mod:`runner.cli.where`, with no state directory: a run on Temporal has none)."""
    address = [] if args.temporal_address == DEFAULT_ADDRESS else ["--temporal-address", args.temporal_address]
    return ["--engine", "temporal", *address]


def _refused(exc: RunAlreadyOpen, path: Path, args: argparse.Namespace) -> McpRunError:
    """A start refused because a run of the file is open on Temporal (``RunAlreadyOpen``), said as a local
    start says it: busy (exit 6) while the run runs, as when another process holds the workflow's lock;
    unfinished (exit 2) when it waits for a decision about items in doubt, as an interrupted local run."""
    from runner.cli.where import inputs_args, run_hint, show_hint

    rid = exc.run_id or "(unknown)"
    # the inputs as given: without them the pasted --resume would be refused as a change of inputs
    given = inputs_args(args.input, args.inputs_file)

    # and the task queue: should the open run end before the command is pasted, it starts one on that queue
    queue = ["--task-queue", args.task_queue] if args.task_queue != DEFAULT_TASK_QUEUE else []

    def follow(*flags: str) -> str:
        return run_hint(None, path, "--resume", *engine_args(args), *queue, *given, *flags)

    cancel = show_hint(None, rid, None, *engine_args(args), command="cancel")
    beside = " --new-run cannot start another beside it (one open run per workflow file on Temporal)."
    beside = beside if args.new_run else ""
    if exc.waiting:
        return UsageError(
            f"run {rid} of {path} is unfinished (in doubt: it waits on Temporal for a decision).{beside} Finish it "
            f"with:\n  {follow('--rerun-in-doubt')}\nor:\n  {follow('--skip-in-doubt')}\nor cancel it with:\n"
            f"  {cancel}"
        )
    return BusyError(
        f"run {rid} of {path} is running on Temporal; one run at a time per workflow.{beside} Follow it with:\n"
        f"  {follow()}\nor cancel it with:\n  {cancel}"
    )


def _changed(exc: OpenRunChanged, args: argparse.Namespace) -> UsageError:
    """``--resume`` of an open run started from another definition (exit 2), with the commands that follow or
    cancel it: on Temporal the run goes on with the definition it started with."""
    from runner.cli.where import show_hint

    logs = show_hint(None, exc.run_id, None, *engine_args(args), "--follow", command="logs")
    cancel = show_hint(None, exc.run_id, None, *engine_args(args), command="cancel")
    return UsageError(f"{exc} Restore the file, or follow it with:\n  {logs}\nor cancel it with:\n  {cancel}")


def temporal_options(args: argparse.Namespace) -> TemporalOptions:
    """The Temporal engine's options, from the command line."""
    batch = {"batch_size": args.batch_size, "heartbeat_timeout": args.heartbeat_timeout}
    return TemporalOptions(address=args.temporal_address, task_queue=args.task_queue, **batch)


@leaves_by_exit
def run_temporal(args: argparse.Namespace, options: RunOptions) -> int:
    """``mcp-run FILE --engine temporal``: :meth:`runner.temporal.engine.TemporalEngine.start`, then (unless
    ``--detach``) followed and reported as a local run is."""
    refuse_unsupported(options)
    need_temporal()
    from runner.api import engine_named
    from runner.engines import RunRequest
    from runner.temporal.engine import TemporalEngine

    path = Path(args.file)
    if args.output and path.is_file():  # before the run starts, as locally: outputs with nowhere to go
        from runner.engine.preflight import check_output

        check_output(Path(args.output), workflow=path, inputs_file=args.inputs_file)
    engine = engine_named("temporal", temporal=temporal_options(args))
    assert isinstance(engine, TemporalEngine)
    from runner.cli.report import Console

    console = Console(args.quiet)
    current: list[str] = []  # the run followed, once known (for the message when Ctrl-C detaches)

    async def main() -> int:
        try:
            started = await engine.start(RunRequest(path, options, reporter=console))
        except RunAlreadyOpen as exc:
            raise _refused(exc, path, args) from None
        except OpenRunChanged as exc:
            raise _changed(exc, args) from None
        current.append(started.run_id)
        return ExitCode.OK if args.detach else await _follow_and_report(engine, started, console, args)

    return _until_interrupted(main, console, current)


@leaves_by_exit
def resume_temporal(args: argparse.Namespace) -> int:
    """``mcp-run resume RUN_ID --engine temporal --rerun-in-doubt|--skip-in-doubt``: the decision about a run's
    items in doubt, sent to its workflow (an update), which then runs what is left; followed as a run is."""
    need_temporal()
    from runner.api import engine_named
    from runner.cli.where import in_doubt_decision
    from runner.temporal.engine import TemporalEngine

    run_id = args.run_id or args.target
    given = in_doubt_decision(args)
    # No decision: the run asks the reconcile tools of its items in doubt (it refuses when some step has none).
    decision: str = "reconcile" if given == "ask" else given
    engine = engine_named("temporal", temporal=temporal_options(args))
    assert isinstance(engine, TemporalEngine)
    from runner.cli.report import Console

    console = Console(args.quiet)

    async def main() -> int:
        started = await engine.resume(run_id, decision)
        what = "asking the reconcile tools about" if decision == "reconcile" else decision
        console.info(f"resuming run {run_id} on Temporal ({what} the items in doubt)")
        return await _follow_and_report(engine, started, console, args)

    return _until_interrupted(main, console, [run_id])


async def _follow_and_report(
    engine: TemporalEngine, started: Started, console: Console, args: argparse.Namespace
) -> int:
    """Follow the run (a line per step as it ends), then report it as a local run is reported."""
    from runner.cli.report import ReportOptions, report

    view = _Progress(console, quiet=args.quiet or args.no_progress, after=started.after)
    outcome = await engine.follow(started, on_entry=view.entry)
    options = ReportOptions(json=args.json, output=args.output, quiet=args.quiet)
    return report(outcome, options, console, state_dir=None, resume_command=_resume_command(outcome, args))


def _until_interrupted(main: Callable[[], Coroutine[Any, Any, int]], console: Console, current: list[str]) -> int:
    """``main`` in an asyncio loop; Ctrl-C detaches (the run, once ``current`` names it, goes on on Temporal)."""
    import asyncio

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        console.error(f"detached: run {current[0]} goes on on Temporal" if current else "interrupted")
        return ExitCode.SIGINT


def _resume_command(outcome: Any, args: argparse.Namespace) -> Callable[..., str] | None:
    """How the run's resume command is written in the hints (``mcp-run resume RUN_ID --engine temporal
    [--temporal-address A] FLAGS``), when the run waits for a decision about its items in doubt; else None."""
    from runner.cli.where import resume_hint

    run_id = outcome.run_id
    if run_id is None or not outcome.in_doubt:
        return None
    return lambda *flags: resume_hint(None, run_id, None, *engine_args(args), *flags)


class _Progress:
    """One line per step as it ends (the events of the run, as the workflow's query gives them), and the
    latest progress notification at most every ``every`` seconds."""

    def __init__(
        self, console: Any, *, quiet: bool, after: int = 0, every: float = 2.0, clock: Any = time.monotonic
    ) -> None:
        self._console = console
        self._quiet = quiet
        self._after = after
        self._every = every
        self._clock = clock
        self._last: float | None = None

    def entry(self, entry: Any) -> None:
        event = entry.event
        kind = getattr(event, "type", None)
        if entry.seq <= self._after or self._quiet:
            return
        if kind == "progress":
            self._progress(event)
            return
        if kind not in ("step_finished", "step_skipped"):
            return
        counts = getattr(event, "counts", None) or {}
        done = f" ({counts.get('succeeded', 0)}/{counts.get('total', 0)} succeeded)" if counts.get("total") else ""
        status = getattr(event, "status", "skipped")
        self._console.info(terminal(f"step {event.step}: {status}{done}"))

    def _progress(self, event: Any) -> None:
        now = self._clock()
        if self._last is not None and now - self._last < self._every:
            return
        self._last = now
        total = f"/{event.total:g}" if event.total is not None else ""
        message = f" {event.message}" if event.message else ""
        self._console.info(terminal(f"step {event.step}: item {event.item}: {event.progress:g}{total}{message}"))


def _exit(code: int) -> int:
    """The exit code, for sure: the SDK's core can abort at interpreter exit (temporalio/sdk-python#300), so
    when run as the ``mcp-run`` program, output is flushed and the process leaves at once with ``code``.
    Called in process (``main(argv)``, or ``MCP_RUN_IN_PROCESS=1``), it returns ``code``."""
    from runner import cli

    if not cli.AS_PROGRAM or os.environ.get("MCP_RUN_IN_PROCESS") == "1":
        return code
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))
