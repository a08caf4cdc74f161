"""``mcp-run runs``/``show``/``logs``: looking at runs from their journals alone; no server is contacted.

A run's status is what its journal says (``succeeded``, ``failed``, ``in-doubt``, ``interrupted`` by a signal)
unless the journal has no final record: then it is ``running`` while a process holds the run's lock, and
``interrupted`` (the process died) when none does.

The functions here build plain data (:func:`run_record`, :func:`show_record`) and text from it; the command
handlers print. Times are shown in UTC, as the journal records them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.errors import UsageError
from runner.exitcodes import ExitCode
from runner.jsontext import dumps
from runner.protocol.mcp import LOG_LEVELS
from runner.termsafe import terminal
from runner.words import plural

if TYPE_CHECKING:
    from runner.engine.journal import JournalCorrupt
    from runner.engine.listing import RunSummary
    from runner.engine.rundir import RunDir
    from runner.engine.state import ItemState, RunState, StepState

__all__ = [
    "JournalTail",
    "add_commands",
    "follow",
    "format_event",
    "render_runs",
    "render_show",
    "run_record",
    "show_record",
]

RECORD_VERSION = 1
LOG_TAIL = 50  # `show` prints the last LOG_TAIL log messages; `logs` prints them all


# -- reading a run ------------------------------------------------------------------------------------------


@dataclass
class Loaded:
    """A run directory read once for ``show``: its listing (:class:`~runner.engine.listing.RunSummary`) and
    its state, the fold of every line of its journal that could be read (up to the damaged one, if any:
    ``summary.damaged`` says where)."""

    summary: RunSummary
    state: RunState

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    @property
    def running_pid(self) -> int | None:
        return self.summary.running_pid


def load(run_dir: RunDir) -> Loaded:
    """Fold the run's journal line by line (results are not kept; ``show`` prints none), up to a damaged line."""
    from runner.engine.journal import JournalCorrupt, read_what_can_be_read
    from runner.engine.listing import from_state
    from runner.engine.rundir import is_locked
    from runner.engine.state import RunState

    pid = is_locked(run_dir.path)
    state = RunState(keep_results=set())
    damaged = run_dir.damage()  # a first record that is not run_started: nothing of the run can be known
    if damaged is None:
        try:
            damaged = read_what_can_be_read(run_dir.journal, state)
        except OSError as exc:
            damaged = JournalCorrupt(f"cannot be read: {exc.strerror or exc}", file=str(run_dir.journal))
    return Loaded(from_state(run_dir, pid, state, damaged), state)


def _ts(value: Any) -> float | None:
    from runner.view.text import ts_seconds

    return ts_seconds(value) if value else None


def _duration(run: RunSummary, now: float) -> float | None:
    start = _ts(run.started_at)
    if start is None:
        return None
    if run.running_pid is not None:
        return max(now - start, 0.0)
    end = _ts(run.last_ts)
    return max(end - start, 0.0) if end is not None else None


def _step_counts(step: StepState, live: bool) -> dict[str, int]:
    """A step's items by what is known of them: ``running`` are dispatched calls of a live run (a process
    holds the run's lock); once no process does, they are ``in_doubt``. An item a resume skipped because it
    was in doubt (``--skip-in-doubt``) has been decided: it counts as failed, as the run's summary counts it."""
    counts = step.counts(live=live)
    return {
        "succeeded": counts.succeeded,
        "failed": counts.failed,
        "running": counts.running,
        "in_doubt": counts.in_doubt,
    }


def damage_record(damaged: JournalCorrupt) -> dict[str, Any]:
    """Where a journal stopped being readable: ``file``, ``line`` (None for the journal as a whole),
    ``field`` (when one is at fault) and ``reason``."""
    return {"file": damaged.file, "line": damaged.line, "field": damaged.path, "reason": damaged.message}


def run_record(run: RunSummary | Loaded, now: float) -> dict[str, Any]:
    """One run as a row of ``mcp-run runs`` (and the head of ``show``)."""
    summary = run.summary if isinstance(run, Loaded) else run
    duration = _duration(summary, now)
    return {
        "run_id": summary.run_id,
        "workflow": summary.workflow,
        "status": summary.shown_status,
        "exit_code": summary.exit_code,
        "started": summary.started_at,
        "finished": summary.ended_at,
        "duration_s": round(duration, 3) if duration is not None else None,
        "pid": summary.running_pid,
        "items": dict(summary.counts),
        **({"damaged": damage_record(summary.damaged)} if summary.damaged is not None else {}),
    }


def show_record(run: Loaded, now: float) -> dict[str, Any]:
    """Everything ``mcp-run show`` prints: steps, failures with their error text, in-doubt items, logs. All of
    it is read off the run's state: the same counts as ``runs`` and the run's summary."""
    from runner.engine.events import ItemStatus, StepStatus, encode

    state = run.state
    live = run.running_pid is not None
    steps: dict[str, dict[str, Any]] = {}
    failures: list[dict[str, Any]] = []
    for session in state.sessions.values():
        if session.status == "failed":  # of the latest attempt: a resume starts its sessions afresh
            failures.append(
                {"server": session.server, "kind": session.kind.value if session.kind else None, "error": session.error}
            )
    for sid, step in state.steps.items():
        status = step.status.value
        if step.status is StepStatus.RUNNING and not live:
            status = "unfinished"
        entry: dict[str, Any] = {"status": status}
        if step.status is StepStatus.SKIPPED and step.reason:
            entry["reason"] = step.reason
        if step.fan_out:
            entry["items"] = step.total
        if step.kind is not None and step.reason:
            entry["error"] = step.reason
            failures.append({"step": sid, "item": None, "kind": "step", "error": step.reason})
        entry.update(_step_counts(step, live))
        steps[sid] = entry
    for sid, item in state.items_in(ItemStatus.FAILED, ItemStatus.SKIPPED):
        kind = item.kind.value if item.kind else None
        failures.append({"step": sid, "item": item.key, "index": item.index, "kind": kind, "error": item.error})

    def entry_of(sid: str, item: ItemState) -> dict[str, Any]:
        return {
            "step": sid,
            "item": item.key,
            "index": item.index,
            "kind": item.kind.value if item.kind else None,
            "error": item.error,
            "dispatched_at": item.dispatched_at,
            "attempts": item.attempts,
            "request_id": item.request_id,
        }

    running: list[dict[str, Any]] = []
    in_doubt: list[dict[str, Any]] = []
    for sid, item in state.in_doubt():
        (running if live and item.status is ItemStatus.DISPATCHED else in_doubt).append(entry_of(sid, item))
    logs = [{k: v for k, v in encode(e).items() if k != "seq"} for e in state.logs]
    return {
        "version": RECORD_VERSION,
        **run_record(run, now),
        "inputs": state.inputs,
        "pids": state.pids,
        "steps": steps,
        "failures": failures,
        "running": running,
        "in_doubt": in_doubt,
        "logs": logs,
        "outputs": state.outputs,
    }


# -- text ---------------------------------------------------------------------------------------------------


def _when(ts: Any) -> str:
    seconds = _ts(ts)
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _dur(value: Any) -> str:
    from runner.view.text import format_elapsed as format_duration

    return format_duration(value) if isinstance(value, int | float) else "-"


def render_runs(records: list[dict[str, Any]]) -> str:
    """A table, oldest first (the newest nearest the prompt)."""
    header = ("RUN ID", "WORKFLOW", "STARTED (UTC)", "DURATION", "STATUS", "DONE", "FAILED", "RUNNING", "IN DOUBT")
    rows = [
        (
            r["run_id"],
            Path(r["workflow"]).name if r["workflow"] else "-",
            _when(r["started"]),
            _dur(r["duration_s"]),
            r["status"] + (f" (pid {r['pid']})" if r["pid"] and r["pid"] > 0 else ""),
            *(str((r["items"] or {}).get(k, "-")) for k in ("succeeded", "failed", "running", "in_doubt")),
        )
        for r in records
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    right = {5, 6, 7, 8}
    lines = []
    for row in [header, *rows]:
        cells = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _indent(text: Any, prefix: str = "      ", max_lines: int = 12) -> str:
    lines = str(text).splitlines() or [""]
    more = len(lines) - max_lines
    lines = lines[:max_lines] + ([f"... ({more} more lines)"] if more > 0 else [])
    return "\n".join(prefix + line for line in lines)


def render_show(
    record: dict[str, Any], *, resume: str | None = None, logs_command: str | None = None, retry: bool = True
) -> str:
    """``show``'s text. ``resume`` and ``logs_command`` are the commands to print as advice (``mcp-run resume
    WORKFLOW RUN_ID``, ``mcp-run logs ...``, with ``--state-dir`` when needed); by default, the run id form.
    ``retry``: whether ``--retry-failed`` is advised for a failed run (not on Temporal yet)."""
    from runner.view.text import format_log, kind_words, one_line, where

    resume = resume or f"mcp-run resume {record['run_id']}"
    logs_command = logs_command or f"mcp-run logs {record['run_id']}"

    status = record["status"]
    if record.get("exit_code") is not None:
        status += f" (exit {record['exit_code']})"
    lines = [f"run {record['run_id']}: {status}"]
    lines.append(f"  workflow  {record['workflow'] or '-'}")
    lines.append(f"  started   {_when(record['started'])} UTC, duration {_dur(record['duration_s'])}")
    if record.get("inputs"):
        lines.append(f"  inputs    {one_line(record['inputs'], 200)}")
    damage = record.get("damaged")
    if damage:
        at = f"{damage['file']}:{damage['line']}" if damage.get("line") is not None else f"{damage['file']}"
        lines.append(f"  journal   damaged at {at}: {damage['reason']}")
        if damage.get("line") is not None and damage["line"] > 1:
            lines.append("            (shown: what the lines before it say; a resume refuses this run)")
        else:
            lines.append("            (nothing of the run can be read; a resume refuses it)")
    if record["steps"]:
        lines.append("")
        lines.append("steps")
        width = max(len(s) for s in record["steps"])
        for sid, step in record["steps"].items():
            text = f"  {sid.ljust(width)}  {step['status']}"
            if "items" in step:
                parts = [f"{step['succeeded']} succeeded"]
                parts += [f"{step['failed']} failed"] if step["failed"] else []
                parts += [f"{step['in_doubt']} in doubt"] if step["in_doubt"] else []
                text += f"  {plural(step['items'], 'item')}: {', '.join(parts)}"
            elif step.get("reason"):
                text += f": {step['reason']}"
            lines.append(text)
    if record["failures"]:
        lines.append("")
        lines.append(f"failures ({len(record['failures'])})")
        for failure in record["failures"]:
            if failure.get("server") is not None:
                head = f"server {failure['server']}: {kind_words(failure['kind'])}"
            else:
                head = f"{where(failure['step'], failure['item'])}: {kind_words(failure['kind'])}"
            lines.append(f"  {head}")
            lines.append(_indent(failure["error"]))
    if record["running"]:
        lines.append("")
        lines.append(f"running ({len(record['running'])}): calls in flight")
        for item in record["running"]:
            sent = f"dispatched {_when(item['dispatched_at'])}, attempt {item['attempts']}"
            lines.append(f"  {where(item['step'], item['item'])}: {sent}")
    if record["in_doubt"]:
        lines.append("")
        lines.append(f"in doubt ({len(record['in_doubt'])}): the server may or may not have run these calls")
        for item in record["in_doubt"]:
            sent = f"dispatched {_when(item['dispatched_at'])}, attempt {item['attempts']}"
            if item["kind"]:
                what = f"{kind_words(item['kind'])} ({sent}): {one_line(item['error'], 200)}"
            else:
                what = f"no outcome recorded ({sent})"
            lines.append(f"  {where(item['step'], item['item'])}: {what}")
        if record["status"] not in ("running", "damaged"):
            lines.append("  check them on the server, then resume with one of:")
            lines.append(f"    {resume} --rerun-in-doubt    # call them again")
            lines.append(f"    {resume} --skip-in-doubt     # mark them failed")
    elif record["status"] == "failed" and retry:
        lines.append("")
        lines.append(f"re-attempt what failed with: {resume} --retry-failed")
    elif record["status"] not in ("succeeded", "running", "damaged", "failed"):
        lines.append("")
        lines.append(f"resume it with: {resume}")
    if record["logs"]:
        lines.append("")
        logs = record["logs"]
        shown = logs[-LOG_TAIL:]
        more = f", the last {len(shown)} (all: {logs_command})" if len(shown) < len(logs) else ""
        lines.append(f"server log ({len(logs)} messages{more})")
        for event in shown:
            lines.append(f"  {_time_of(event.get('ts'))} {format_log(event)}")
    return "\n".join(lines)


def _time_of(ts: Any) -> str:
    """``21:33:16.623``: the clock time of an event, to the millisecond."""
    text = str(ts or "")
    return text[11:23] if len(text) >= 23 and text[10] == "T" else text


def format_event(event: dict[str, Any]) -> str | None:
    """One journal event as a line of ``mcp-run logs``, or None for the events it does not show."""
    from runner.view.text import format_log, one_line, where

    kind = event.get("type")
    when = _time_of(event.get("ts"))
    if kind == "log":
        return f"{when} {format_log(event)}"
    if kind == "progress":
        total = event.get("total")
        amount = _num(event.get("progress")) + (f"/{_num(total)}" if total else "")
        message = f" {one_line(event['message'], 200)}" if event.get("message") else ""
        return f"{when} progress {where(event.get('step'), event.get('item'))} {amount}{message}"
    if kind in ("run_started", "run_resumed", "run_finished", "run_stopped", "run_interrupted"):
        status = f" {event['status']}" if event.get("status") else ""
        return f"{when} {kind.replace('_', ' ')}{status}"
    if kind == "step_started":
        items = f": {plural(event['items'], 'item')}" if event.get("items") is not None else ""
        return f"{when} step {event.get('step')} started{items}"
    if kind == "step_finished":
        error = f": {one_line(event['error'], 200)}" if event.get("error") else ""
        return f"{when} step {event.get('step')} {event.get('status')}{error}"
    if kind == "step_skipped":
        return f"{when} step {event.get('step')} skipped: {event.get('reason')}"
    return None


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# -- following a journal ------------------------------------------------------------------------------------


class JournalTail:
    """Sans-IO: feed the bytes appended to a journal, get back the complete events (a partial last line waits
    for the rest). Lines are numbered from the start of the file; at a line that is not an event, the events
    before it are returned and :attr:`problem` says what is wrong there (nothing more is read)."""

    def __init__(self, source: str = "journal.jsonl") -> None:
        self._pending = b""
        self._line = 0
        self.source = source
        self.problem: JournalCorrupt | None = None

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        return list(self.events(data))

    def events(self, data: bytes) -> Iterator[dict[str, Any]]:
        """:meth:`feed`, one event at a time (a chunk of a journal need not be held as events)."""
        from runner.engine.events import encode
        from runner.engine.journal import JournalCorrupt, decode_line

        if self.problem is not None:
            return
        buffer = self._pending + data
        end = buffer.rfind(b"\n") + 1
        self._pending = buffer[end:]
        start = 0
        while start < end:
            stop = buffer.index(b"\n", start) + 1
            line, start = buffer[start:stop], stop
            self._line += 1
            if not line.strip():
                continue
            try:
                event = encode(decode_line(line, source=self.source, line_no=self._line))
            except JournalCorrupt as exc:
                self.problem = exc
                return
            yield event


READ_CHUNK = 1 << 18
"""How much of a journal ``logs`` reads at a time: its memory is this and the longest line, whatever the
journal's size."""


def follow(
    path: Path,
    *,
    running: Callable[[], bool],
    sleep: Callable[[float], None] = time.sleep,
    poll: float = 0.25,
    keep_going: bool = True,
) -> Iterator[dict[str, Any]]:
    """Every event of the journal at ``path`` (in its journal form); with ``keep_going``, keep reading what is
    appended until the run ends (its ``run_finished``, ``run_stopped`` or ``run_interrupted`` record) or no
    process holds it any more, polling every ``poll`` seconds (less while lines keep coming). Reads the file
    a chunk at a time. At a line that is not an event, raises ``JournalCorrupt`` after the events before it."""
    tail = JournalTail(str(path))
    with path.open("rb") as file:
        while True:
            alive = running()  # asked before reading: what was written before the lock went is read below
            ended = got = False
            while chunk := file.read(READ_CHUNK):
                for event in tail.events(chunk):
                    got = True
                    ended = ended or event.get("type") in _ENDS
                    yield event
                if tail.problem is not None:
                    raise tail.problem
            if not keep_going or not alive or ended:
                return
            sleep(poll / 4 if got else poll)


_ENDS = ("run_finished", "run_stopped", "run_interrupted")


# -- the commands -------------------------------------------------------------------------------------------


def _target(args: argparse.Namespace) -> tuple[Path, Path | None, RunDir]:
    """``[WORKFLOW] [RUN_ID]`` of ``show`` and ``logs``: (state directory, workflow, run). A workflow alone
    names its newest run."""
    from runner.cli.where import find_named_run, parse_target, short
    from runner.engine.rundir import resolve_state_dir, runs_of

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
    from runner.cli.where import parse_target, short
    from runner.engine.listing import summarize
    from runner.engine.rundir import iter_run_dirs, resolve_state_dir, runs_of

    workflow, _ = parse_target(args.workflow, None) if args.workflow is not None else (None, None)
    if args.workflow is not None and workflow is None:
        raise UsageError(f"no workflow file {args.workflow!r} (`runs` takes a WORKFLOW, not a run id)")
    state_dir = resolve_state_dir(args.state_dir, workflow)
    if args.keep is not None and not args.prune:
        raise UsageError("--keep goes with --prune")
    if args.prune:
        if args.keep is None or args.keep < 0:
            raise UsageError("--prune needs --keep N (N >= 0): how many finished runs to keep")
        from runner.engine.listing import prune

        removed = prune(state_dir, args.keep, workflow=workflow)
        if args.json:
            print(json.dumps({"removed": removed}, indent=2))
        else:
            print(f"removed {len(removed)} finished run(s)" + "".join(f"\n  {r}" for r in removed))
        return ExitCode.OK
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
    if args.engine == "temporal":
        from runner.cli.temporal_inspect import show_temporal

        return show_temporal(args)
    from runner.cli.where import resume_hint, show_hint

    state_dir, _workflow, run_dir = _target(args)
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


def logs_command(args: argparse.Namespace) -> int:
    if args.engine == "temporal":
        from runner.cli.temporal_inspect import logs_temporal

        return logs_temporal(args)
    from runner.engine.rundir import is_locked
    from runner.view.text import level_index

    _state_dir, _workflow, run_dir = _target(args)
    threshold = level_index(args.level)
    for event in follow(
        run_dir.journal,
        running=lambda: is_locked(run_dir.path) is not None,
        keep_going=args.follow,
        poll=min(max(args.poll, 0.01), 2.0),
    ):
        if event.get("type") == "log" and level_index(event.get("level")) < threshold:
            continue
        if event.get("type") == "progress" and args.no_progress_events:
            continue
        line = format_event(event)
        if line is not None:
            print(terminal(line), flush=args.follow)
    return ExitCode.OK


def _add_engine(parser: argparse.ArgumentParser) -> None:
    from runner.cli.temporal import add_connection

    parser.add_argument(
        "--engine",
        choices=("local", "temporal"),
        default="local",
        help="the runs of this engine: the local journals (default), or Temporal's",
    )
    add_connection(parser)


def _add_state_dir(parser: argparse.ArgumentParser) -> None:
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


def _add_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="WORKFLOW|RUN_ID", help="a workflow file or a run id")
    parser.add_argument("run_id", metavar="RUN_ID", nargs="?", help="a run id (after a WORKFLOW)")


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
    _add_state_dir(runs)
    runs.add_argument("--json", action="store_true", help="print the runs as JSON")
    runs.add_argument("--limit", type=int, metavar="N", help="only the newest N runs")
    runs.add_argument(
        "--prune", action="store_true", help="remove old finished runs (never a running or unfinished one)"
    )
    runs.add_argument("--keep", type=int, metavar="N", help="with --prune: how many finished runs to keep")
    _add_engine(runs)
    runs.set_defaults(handler=runs_command)

    show = sub.add_parser(
        "show",
        help="show one run: steps, failures, in-doubt items, server log",
        usage="%(prog)s [WORKFLOW] RUN_ID [options]\n       %(prog)s WORKFLOW [options]",
        description="Show a run from its journal: its steps, failures with their error text, the calls in\n"
        "flight or in doubt, the server log messages, and the command that resumes it.\n\n"
        + TARGET_HELP
        % {"command": "mcp-run show"},
        epilog="examples:\n  mcp-run show workflows/convert_docs.yaml\n  mcp-run show 3f9a1c --json\n\n" + exit_help,
        formatter_class=formatter,
    )
    _add_target(show)
    _add_state_dir(show)
    show.add_argument("--json", action="store_true", help="print the run as JSON")
    _add_engine(show)
    show.set_defaults(handler=show_command)

    logs = sub.add_parser(
        "logs",
        help="print a run's server log and progress messages",
        usage="%(prog)s [WORKFLOW] RUN_ID [options]\n       %(prog)s WORKFLOW [options]",
        description="Print the log and progress events of a run's journal; with --follow, keep printing until\n"
        "the run finishes.\n\n" + TARGET_HELP % {"command": "mcp-run logs"},
        epilog="examples:\n  mcp-run logs workflows/convert_docs.yaml --follow\n\n" + exit_help,
        formatter_class=formatter,
    )
    _add_target(logs)
    _add_state_dir(logs)
    logs.add_argument("--follow", "-f", action="store_true", help="wait for new events until the run finishes")
    logs.add_argument(
        "--level",
        default="debug",
        choices=LOG_LEVELS,
        help="only log messages at or above this level (default: all)",
    )
    logs.add_argument("--no-progress-events", action="store_true", help="leave out progress events")
    _add_engine(logs)
    logs.add_argument("--poll", type=float, default=0.25, metavar="S", help=argparse.SUPPRESS)
    logs.set_defaults(handler=logs_command)
