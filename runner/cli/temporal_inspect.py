"""``mcp-run runs|show|logs --engine temporal``: the runs on Temporal, shown as local runs are.

``runs`` lists the ``mcp-run/*`` workflows (Temporal's list API) with their status. ``show`` and ``logs``
read a run's events as ``export`` does (replayed from the workflow's history: no worker needed) and feed
them to the local renderers of :mod:`runner.cli.runtext`: the same text and ``--json`` as for a local run.
``runner.temporal`` is imported only inside the functions: the base install runs without the ``temporal``
extra.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from runner.cli.temporal import leaves_by_exit
from runner.errors import UsageError
from runner.exitcodes import ExitCode
from runner.jsontext import dumps
from runner.termsafe import terminal

T = TypeVar("T")


def _run(make: Callable[[Any], Awaitable[T]], args: argparse.Namespace) -> T:
    """Connect to Temporal (exit 4 when it cannot be reached) and run ``make(client)``."""
    from runner.engines import need_temporal

    need_temporal()
    import asyncio

    from runner.temporal.client import connect

    async def main() -> T:
        return await make(await connect(args.temporal_address))

    return asyncio.run(main())


def _iso(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


@leaves_by_exit
def runs_temporal(args: argparse.Namespace) -> int:
    from runner.cli.runrecord import RECORD_VERSION
    from runner.cli.runtext import render_runs

    if args.prune or args.keep is not None:
        raise UsageError("--prune is for local runs; runs on Temporal are kept by Temporal's retention")
    workflow = str(Path(args.workflow).resolve()) if args.workflow is not None else None

    async def listed(client: Any) -> list[Any]:
        from runner.temporal.listing import list_runs

        return await list_runs(client)

    runs = [r for r in _run(listed, args) if workflow is None or r.workflow == workflow]
    if args.limit is not None:
        runs = runs[-args.limit :] if args.limit > 0 else []
    records = []
    for run in runs:
        end = run.finished.timestamp() if run.finished is not None else time.time()
        duration = end - run.started.timestamp() if run.started is not None else None
        records.append(
            {
                "run_id": run.run_id,
                "workflow": run.workflow,
                "status": run.status,
                "exit_code": run.exit_code,
                "started": _iso(run.started),
                "finished": _iso(run.finished),
                "duration_s": round(max(duration, 0.0), 3) if duration is not None else None,
                "pid": None,
                "items": run.counts,
            }
        )
    if args.json:
        print(json.dumps({"version": RECORD_VERSION, "temporal": args.temporal_address, "runs": records}, indent=2))
    elif not records:
        print(f"no runs on Temporal at {args.temporal_address}", file=sys.stderr)
    else:
        print(terminal(render_runs(records)))
    return ExitCode.OK


def _run_id(args: argparse.Namespace) -> str:
    if args.run_id is not None:
        raise UsageError("with --engine temporal, name the run by its id alone: mcp-run show RUN_ID --engine temporal")
    return str(args.target)


def _read_run(args: argparse.Namespace) -> tuple[str, bool, list[Any]]:
    """The run ``args`` names on Temporal: its full id, whether it is live (a worker runs it: not parked on a
    decision, not ended), and its events as :class:`~runner.engine.core.events.Entry`\\ s, read as shown."""
    from runner.engine.core.events import decode
    from runner.engine.core.state import RunState
    from runner.masking import shown_fields

    run_id = _run_id(args)

    async def read(client: Any) -> tuple[str, bool, list[dict[str, Any]]]:
        from runner.temporal.history import located_events
        from runner.temporal.runids import locate

        run = await locate(client, run_id)  # a short id names its run: the full one from here on
        return run.run_id, run.open, await located_events(client, run)

    run_id, open_, events = _run(read, args)
    entries = [decode(shown_fields(obj)) for obj in events]  # encoded text, shown as a person reads it
    state = RunState(keep_results=set())
    for entry in entries:
        state.apply(entry)
    from runner.temporal.client import waits_for_decision

    return run_id, open_ and not waits_for_decision(state) and state.ended_by is None, entries


@leaves_by_exit
def show_temporal(args: argparse.Namespace) -> int:
    from runner.cli.runrecord import Loaded, show_record
    from runner.cli.runtext import render_show
    from runner.cli.temporal import engine_args
    from runner.cli.where import resume_hint, show_hint
    from runner.engine.core.state import fold
    from runner.engine.journal.listing import from_state
    from runner.engine.journal.rundir import RunDir

    run_id, live, entries = _read_run(args)
    state = fold(entries, keep_results=set())
    run = Loaded(from_state(RunDir(Path(run_id)), 0 if live else None, state, None), state)
    record = show_record(run, time.time())
    if args.json:
        print(dumps(record, indent=2, default=str))
    else:
        where = engine_args(args)
        print(
            terminal(
                render_show(
                    record,
                    resume=resume_hint(None, run_id, None, *where),
                    logs_command=show_hint(None, run_id, None, *where, command="logs"),
                    retry=False,
                )
            )
        )
    return ExitCode.OK


@leaves_by_exit
def report_temporal(args: argparse.Namespace, write: Callable[[Any], list[str]]) -> int:
    """``report --engine temporal``: the run's events from its workflow's history (as ``show`` reads them), made
    into the report ``write`` writes (it returns the files written)."""
    from runner import __version__
    from runner.cli.temporal import engine_args
    from runner.cli.where import decision_lines, resume_hint
    from runner.report.model import build

    run_id, live, entries = _read_run(args)
    resume = resume_hint(None, run_id, None, *engine_args(args))
    decisions = [line.strip() for line in decision_lines(lambda flag: f"{resume} {flag}", "")]
    model = build(entries, live=live, status="running" if live else None, version=__version__, decisions=decisions)
    written = write(model)
    print(terminal(f"run {run_id}: {model.status}; wrote {', '.join(written)}"), file=sys.stderr)
    return ExitCode.OK


@leaves_by_exit
def logs_temporal(args: argparse.Namespace) -> int:
    from runner.cli.runtext import log_line
    from runner.masking import shown_fields
    from runner.view.text import level_index

    run_id = _run_id(args)
    threshold = level_index(args.level)
    poll = min(max(args.poll, 0.01), 2.0)

    def emit(event: dict[str, Any]) -> None:
        line = log_line(event, threshold, progress=not args.no_progress_events)
        if line is not None:
            print(terminal(line), flush=args.follow)

    async def read(client: Any) -> None:
        import asyncio

        from runner.temporal.history import HistoryFollower
        from runner.temporal.runids import locate

        run = await locate(client, run_id)
        follower = HistoryFollower(client, run)
        seen = 0
        while True:
            open_ = await run.still_open()  # asked first: what came before it closed is read below
            batch = await follower.events(start=seen)
            seen += len(batch)
            for event in batch:
                emit(shown_fields(event))
            ended = any(e.get("type") in ("run_finished", "run_stopped", "run_interrupted") for e in batch)
            if not args.follow or not open_ or ended:
                return
            await asyncio.sleep(poll / 4 if batch else poll)

    _run(read, args)
    return ExitCode.OK
