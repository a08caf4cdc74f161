"""The Temporal commands: ``temporal-dev``, ``worker --engine temporal``, and ``run --engine temporal``.

``runner.temporal`` (and ``temporalio``) are imported only here, inside the commands that need them: the
base install runs without the ``temporal`` extra.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from runner.errors import BusyError, McpRunError, UsageError
from runner.exitcodes import ExitCode
from runner.termsafe import terminal

DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_TASK_QUEUE = "mcp-run"
EXTRA_HINT = "install the extra: pip install 'mcp-run[temporal]'"


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """``--engine`` and the options of a run on Temporal."""
    parser.add_argument(
        "--engine",
        choices=("local", "temporal"),
        default="local",
        help="where the run happens: here (default), or on Temporal's workers (`mcp-run worker`)",
    )
    add_connection(parser)
    parser.add_argument(
        "--detach", action="store_true", help="with --engine temporal: start the run and return at once"
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=100,
        metavar="N",
        help="with --engine temporal: items per call activity (default: 100)",
    )
    parser.add_argument(
        "--heartbeat-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="with --engine temporal: a worker silent this long is taken for dead (default: 10)",
    )


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


def leaves_by_exit(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Every Temporal command leaves through here: an error is reported as :func:`runner.cli.main` reports
    it, Ctrl-C exits 130, and the process then leaves by :func:`_exit` with the code, whatever the path."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            code = handler(args)
        except McpRunError as exc:
            from runner.cli import _print_json_error

            prefix = "error: " if exc.exit_code != ExitCode.OK else ""
            print(f"mcp-run: {prefix}{terminal(str(exc))}", file=sys.stderr)
            if getattr(args, "json", False):
                _print_json_error(exc)
            code = int(exc.exit_code)
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


def _need_temporal() -> None:
    try:
        import temporalio  # noqa: F401
    except ImportError:
        raise UsageError(f"--engine temporal needs temporalio; {EXTRA_HINT}") from None


@leaves_by_exit
def worker_command(args: argparse.Namespace) -> int:
    _need_temporal()
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
    _need_temporal()
    import asyncio

    from runner.temporal.client import cancel, connect

    async def main() -> None:
        await cancel(await connect(args.temporal_address), args.run_id)

    asyncio.run(main())
    print(f"mcp-run: cancel requested for run {terminal(args.run_id)}", file=sys.stderr)
    return ExitCode.OK


@leaves_by_exit
def export_command(args: argparse.Namespace) -> int:
    _need_temporal()
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


def _refused(exc: Any, path: Path, args: argparse.Namespace) -> McpRunError:
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


async def _same_definition(found: Any, spec: Any, path: Path, args: argparse.Namespace) -> None:
    """``--resume`` of an open run refuses a changed workflow file or inputs (exit 2), as a local resume does;
    on Temporal the run goes on with the definition it started with, so there is no ``--allow-changed``."""
    from runner.cli.where import show_hint
    from runner.temporal.changes import changes_since

    run_id = found.run_id
    changes = changes_since(await found.description.memo(), spec)
    if changes:
        logs = show_hint(None, run_id, None, *engine_args(args), "--follow", command="logs")
        cancel = show_hint(None, run_id, None, *engine_args(args), command="cancel")
        raise UsageError(
            f"run {run_id} of {path} cannot be resumed as is:\n  - "
            + "\n  - ".join(changes)
            + "\nOn Temporal the run goes on with the definition it started with (--allow-changed is not available "
            f"there). Restore the file, or follow it with:\n  {logs}\nor cancel it with:\n  {cancel}"
        )


@leaves_by_exit
def run_temporal(args: argparse.Namespace) -> int:
    """``mcp-run FILE --engine temporal``: see :mod:`runner.temporal.client`."""
    for flag in ("retry_failed", "no_journal", "allow_changed", "protocol_version", "elicitation"):
        if getattr(args, flag, False):
            raise UsageError(f"--{flag.replace('_', '-')} is not available with --engine temporal yet")
    _need_temporal()
    import asyncio

    from runner.cli.report import Console, ReportOptions, report
    from runner.workflow.loader import load_inputs_file, validate

    path = Path(args.file)
    if not path.is_file():
        raise UsageError(f"no workflow file {str(path)!r}")
    inputs_file = load_inputs_file(args.inputs_file) if args.inputs_file else None
    plan = validate(str(path), require_inputs=True, input_pairs=args.input, inputs_file=inputs_file)
    if args.output:  # before the run starts, as locally: outputs with nowhere to go are found out now
        from runner.engine.preflight import check_output

        check_output(Path(args.output), workflow=path, inputs_file=args.inputs_file)
    console = Console(args.quiet)

    from runner.temporal import client as remote

    if not 1 <= args.batch_size <= 1000:
        raise UsageError("--batch-size must be between 1 and 1000")
    if not args.heartbeat_timeout >= 1:
        raise UsageError("--heartbeat-timeout must be at least 1 second")
    spec = replace(
        remote.make_spec(path, plan),
        batch_size=args.batch_size,
        heartbeat_timeout=args.heartbeat_timeout,
        server_log_level=args.server_log_level,  # carried to the workers (runner.temporal.serverlog)
    )

    from runner.cli.where import in_doubt_decision

    decision = in_doubt_decision(args)
    choice = None if decision == "ask" else decision
    current: list[str] = []  # the run followed, once known (for the message when Ctrl-C detaches)

    async def open_handle(client: Any) -> tuple[Any, Any]:
        """The handle of the run to follow, and the open run found (None when it was started here). With
        --resume: the file's open run, else a new one; without: a new one, refused by Temporal when a run is
        open."""
        for _ in range(3):  # an open run found by --resume may close before it is followed: start then
            found = await remote.open_run(client, spec.workflow) if args.resume else None
            if found is not None:
                return found.handle, found
            try:
                return await remote.start_run(client, spec, args.task_queue), None
            except remote.RunAlreadyOpen as exc:
                if not args.resume:
                    raise _refused(exc, path, args) from None
        raise UsageError(f"the runs of {path} on Temporal change too fast to follow one; try again")

    async def main() -> int:
        client = await remote.connect(args.temporal_address)
        handle, found = await open_handle(client)
        run_id = spec.run_id if found is None else found.run_id
        current.append(run_id)
        start = 0
        if found is None:
            console.info(f"run {run_id} on Temporal (workflow {handle.id}, task queue {args.task_queue})")
        else:
            await _same_definition(found, spec, path, args)
            if choice is not None:
                handle, _plan, start = await remote.decide(client, run_id, choice)
            console.info(f"following run {run_id} on Temporal (workflow {handle.id})")
        if args.detach:
            return ExitCode.OK
        view = _Progress(console, quiet=args.quiet or args.no_progress, after=start)
        started_at = time.monotonic()
        followed = await remote.follow(handle, on_entry=view.entry)
        outcome = remote.outcome_of(plan, followed)
        outcome.duration = time.monotonic() - started_at
        options = ReportOptions(json=args.json, output=args.output, quiet=args.quiet)
        return report(outcome, options, console, state_dir=None, resume_command=_resume_command(outcome, args))

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        if current:
            console.error(f"detached: run {current[0]} goes on on Temporal")
        else:
            console.error("interrupted")
        return ExitCode.SIGINT


@leaves_by_exit
def resume_temporal(args: argparse.Namespace) -> int:
    """``mcp-run resume RUN_ID --engine temporal --rerun-in-doubt|--skip-in-doubt``: the decision about a run's
    items in doubt, sent to its workflow (an update), which then runs what is left; followed as a run is."""
    _need_temporal()
    import asyncio

    from runner.cli.report import Console, ReportOptions, report

    run_id = args.run_id or args.target
    from runner.cli.where import in_doubt_decision

    decision = in_doubt_decision(args)
    if decision == "ask":
        raise UsageError(
            "a run on Temporal is resumed by deciding its items in doubt: --rerun-in-doubt, --skip-in-doubt or "
            "--accept-in-doubt"
        )
    choice: str = decision
    console = Console(args.quiet)

    from runner.temporal.client import connect, decide, follow, outcome_of

    async def main() -> int:
        client = await connect(args.temporal_address)
        handle, plan, start = await decide(client, run_id, choice)
        console.info(f"resuming run {run_id} on Temporal ({choice} the items in doubt)")
        view = _Progress(console, quiet=args.quiet or args.no_progress, after=start)
        started = time.monotonic()
        followed = await follow(handle, on_entry=view.entry)
        outcome = outcome_of(plan, followed)
        outcome.duration = time.monotonic() - started
        options = ReportOptions(json=args.json, output=args.output, quiet=args.quiet)
        return report(outcome, options, console, state_dir=None, resume_command=_resume_command(outcome, args))

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        console.error(f"detached: run {run_id} goes on on Temporal")
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
