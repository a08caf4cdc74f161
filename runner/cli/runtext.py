"""The text of ``mcp-run runs``, ``show`` and ``logs``, from the plain data of :mod:`runner.cli.runrecord`
(and the events of a journal). Times are shown in UTC, as the journal records them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.cli.where import decision_lines
from runner.words import plural

__all__ = ["LOG_TAIL", "format_event", "log_line", "render_runs", "render_show"]

LOG_TAIL = 50  # `show` prints the last LOG_TAIL log messages; `logs` prints them all


def _when(ts: Any) -> str:
    from runner.view.text import ts_seconds

    seconds = ts_seconds(ts) if ts else None
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _dur(value: Any) -> str:
    from runner.view.text import format_elapsed as format_duration

    return format_duration(value) if isinstance(value, int | float) else "-"


_COLUMNS = ("succeeded", "failed", "running", "in_doubt", "reused", "reconciled")


def render_runs(records: list[dict[str, Any]]) -> str:
    """A table, oldest first (the newest nearest the prompt)."""
    header = (
        "RUN ID", "WORKFLOW", "STARTED (UTC)", "DURATION", "STATUS", "DONE", "FAILED", "RUNNING", "IN DOUBT",
        "REUSED", "RECONCILED",
    )  # fmt: skip
    rows = [
        (
            r["run_id"],
            Path(r["workflow"]).name if r["workflow"] else "-",
            _when(r["started"]),
            _dur(r["duration_s"]),
            r["status"] + (f" (pid {r['pid']})" if r["pid"] and r["pid"] > 0 else ""),
            *(str((r["items"] or {}).get(k, "-")) for k in _COLUMNS),
        )
        for r in records
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    right = {5, 6, 7, 8, 9, 10}
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
    """``show``'s text, from its ``--json`` record (:func:`runner.cli.runrecord.show_record`: the text says
    what the JSON holds, in words). ``resume`` and ``logs_command`` are the commands to print as advice
    (``mcp-run resume WORKFLOW RUN_ID``, ``mcp-run logs ...``, with ``--state-dir`` when needed); by default,
    the run id form. ``retry``: whether ``--retry-failed`` is advised for a failed run (not on Temporal yet)."""
    resume = resume or f"mcp-run resume {record['run_id']}"
    logs_command = logs_command or f"mcp-run logs {record['run_id']}"
    sections = [
        _head(record),
        _steps(record["steps"]),
        _failures(record["failures"]),
        _throttled(record.get("throttled") or {}),
        _running(record["running"]),
        _accepted(record.get("accepted") or []),
        _in_doubt(record, resume, retry),
        _logs(record["logs"], logs_command),
    ]
    return "\n\n".join(section for section in sections if section)


def _head(record: dict[str, Any]) -> str:
    from runner.view.text import one_line

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
    return "\n".join(lines)


def _steps(steps: dict[str, dict[str, Any]]) -> str:
    from runner.view.text import kept_words

    if not steps:
        return ""
    lines = ["steps"]
    width = max(len(s) for s in steps)
    for sid, step in steps.items():
        text = f"  {sid.ljust(width)}  {step['status']}"
        if "items" in step:
            kept = kept_words(step.get("reused", 0), step.get("reconciled", 0))
            parts = [f"{step['succeeded']} succeeded{kept}"]
            parts += [f"{step['failed']} failed"] if step["failed"] else []
            parts += [f"{step['in_doubt']} in doubt"] if step["in_doubt"] else []
            text += f"  {plural(step['items'], 'item')}: {', '.join(parts)}"
        elif step.get("reason"):
            text += f": {step['reason']}"
        lines.append(text)
    return "\n".join(lines)


def _throttled(throttled: dict[str, dict[str, Any]]) -> str:
    """The servers that pushed back: ``server api: 7 answers of 429/503, pace lowered 3 times (paused 3.0 s in
    all); last at 2 at a time, 16.8 calls/s``."""
    if not throttled:
        return ""
    lines = ["throttled"]
    for server, c in throttled.items():
        pace = f"; last at {c['limit']} at a time" if c.get("limit") is not None else ""
        if c.get("rate") is not None:
            pace += f", {c['rate']:.1f} calls/s"
        lines.append(
            f"  server {server}: {plural(c['refused'], 'answer')} of 429/503, pace lowered "
            f"{plural(c['slowed'], 'time')} (paused {c['paused_s']:.1f} s in all){pace}"
        )
    return "\n".join(lines)


def _failures(failures: list[dict[str, Any]]) -> str:
    from runner.view.text import kind_words, where

    if not failures:
        return ""
    lines = [f"failures ({len(failures)})"]
    for failure in failures:
        if failure.get("server") is not None:
            head = f"server {failure['server']}: {kind_words(failure['kind'])}"
        else:
            head = f"{where(failure['step'], failure['item'])}: {kind_words(failure['kind'])}"
        lines.append(f"  {head}")
        lines.append(_indent(failure["error"]))
    return "\n".join(lines)


def _running(running: list[dict[str, Any]]) -> str:
    from runner.view.text import where

    if not running:
        return ""
    lines = [f"running ({len(running)}): calls in flight"]
    for item in running:
        sent = f"dispatched {_when(item['dispatched_at'])}, attempt {item['attempts']}"
        lines.append(f"  {where(item['step'], item['item'])}: {sent}")
    return "\n".join(lines)


def _accepted(accepted: list[dict[str, Any]]) -> str:
    from runner.view.text import where

    if not accepted:
        return ""
    lines = [f"recorded as done ({len(accepted)}): were in doubt, accepted by --accept-in-doubt"]
    lines.extend(f"  {where(item['step'], item['item'])}" for item in accepted)
    return "\n".join(lines)


def _in_doubt(record: dict[str, Any], resume: str, retry: bool) -> str:
    """The items in doubt and the decisions a resume takes about them; else what a resume would do."""
    from runner.view.text import kind_words, one_line, where

    status = record["status"]
    if not record["in_doubt"]:
        if status == "failed" and retry:
            return f"re-attempt what failed with: {resume} --retry-failed"
        if status not in ("succeeded", "running", "damaged", "failed"):
            return f"resume it with: {resume}"
        return ""
    lines = [f"in doubt ({len(record['in_doubt'])}): the server may or may not have run these calls"]
    for item in record["in_doubt"]:
        sent = f"dispatched {_when(item['dispatched_at'])}, attempt {item['attempts']}"
        if item["kind"]:
            what = f"{kind_words(item['kind'])} ({sent}): {one_line(item['error'], 200)}"
        else:
            what = f"no outcome recorded ({sent})"
        lines.append(f"  {where(item['step'], item['item'])}: {what}")
    if status not in ("running", "damaged"):
        lines.append("  check them on the server, then resume with one of:")
        lines.extend(decision_lines(lambda flag: f"{resume} {flag}", "    "))
    return "\n".join(lines)


def _logs(logs: list[dict[str, Any]], logs_command: str) -> str:
    from runner.view.text import format_log

    if not logs:
        return ""
    shown = logs[-LOG_TAIL:]
    more = f", the last {len(shown)} (all: {logs_command})" if len(shown) < len(logs) else ""
    lines = [f"server log ({len(logs)} messages{more})"]
    lines.extend(f"  {_time_of(event.get('ts'))} {format_log(event)}" for event in shown)
    return "\n".join(lines)


def _time_of(ts: Any) -> str:
    """``21:33:16.623``: the clock time of an event, to the millisecond."""
    text = str(ts or "")
    return text[11:23] if len(text) >= 23 and text[10] == "T" else text


def log_line(event: dict[str, Any], threshold: int, *, progress: bool = True) -> str | None:
    """An event as ``logs`` prints it (:func:`format_event`), or None: not shown, a log message below the
    ``threshold`` level, or a progress event when ``progress`` is off."""
    from runner.view.text import level_index

    kind = event.get("type")
    if kind == "log" and level_index(event.get("level")) < threshold:
        return None
    if kind == "progress" and not progress:
        return None
    return format_event(event)


def format_event(event: dict[str, Any]) -> str | None:
    """One journal event as a line of ``mcp-run logs``, or None for the events it does not show."""
    from runner.engine.core.events import task_words
    from runner.view.text import format_log, one_line, where

    kind = event.get("type")
    when = _time_of(event.get("ts"))
    if kind == "log":
        return f"{when} {format_log(event)}"
    if kind == "progress":
        total = event.get("total")
        amount = _num(event.get("progress")) + (f"/{_num(total)}" if total else "")
        message = f" {one_line(event['message'], 200)}" if event.get("message") else ""
        folded = f" ({plural(event['folded'], 'earlier notification')} folded in)" if event.get("folded") else ""
        return f"{when} progress {where(event.get('step'), event.get('item'))} {amount}{message}{folded}"
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
    if kind == "task_created":
        return f"{when} {where(event.get('step'), event.get('item'))}: task {event.get('task_id')} created"
    if kind == "task_status":
        said = one_line(event["message"], 200) if event.get("message") else None
        text = task_words(event.get("status"), said, event.get("task_id"))
        return f"{when} {where(event.get('step'), event.get('item'))}: {text}"
    return None


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
