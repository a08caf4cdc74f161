"""``mcp-run show [WORKFLOW] [RUN_ID] --item KEY [--step STEP]``: one item of a run, from its journal alone: where
it stands, its result (or error) and every event that names it, in order.

The journal holds what was sent as the item's dispatch (server, tool, request id, attempt), not the arguments
themselves (they are rendered from the workflow when the call is made); its text is read as shown, secrets
masked as the journal holds them. A plain step's one call is named by the step's id.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runner.errors import UsageError

if TYPE_CHECKING:
    from runner.engine.core.events import Entry
    from runner.engine.journal.rundir import RunDir

__all__ = ["ItemRecord", "item_record", "render_item"]

_ITEM_EVENTS = (
    "item_dispatched",
    "item_succeeded",
    "item_failed",
    "progress",
    "log",
    "task_created",
    "task_status",
    "stream_resumed",
)


@dataclass
class ItemRecord:
    step: str
    key: str
    index: int | None = None
    status: str = "unknown"
    kind: str | None = None
    error: str | None = None
    attempts: int = 0
    server: str | None = None
    tool: str | None = None
    result: Any = None
    events: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "item": self.key,
            "index": self.index,
            "status": self.status,
            "kind": self.kind,
            "error": self.error,
            "attempts": self.attempts,
            "server": self.server,
            "tool": self.tool,
            "result": self.result,
            "events": self.events,
        }


def _about(entry: Entry, step: str | None, key: str) -> bool:
    """Whether ``entry`` is about item ``key`` (of ``step``, when given): one of its events, or a decision
    naming it."""
    from runner.engine.core.events import DoubtDecided

    event: Any = entry.event
    if isinstance(event, DoubtDecided):
        return key in event.keys and step in (None, event.step)
    return event.type in _ITEM_EVENTS and event.item == key and step in (None, event.step)


def item_record(run_dir: RunDir, key: str, step: str | None, *, live: bool) -> ItemRecord:
    """The item ``key`` (of ``step``, when given) of the run in ``run_dir``, read in one pass over its journal;
    a :class:`UsageError` naming the candidates when no item, or more than one, has that key."""
    from runner.engine.core.events import encode
    from runner.engine.core.state import RunState
    from runner.engine.core.vocabulary import ItemStatus
    from runner.engine.journal.reader import JournalCorrupt, iter_journal

    state = RunState(keep_results=set())
    mine: list[Entry] = []
    try:
        with run_dir.journal.open("rb") as f:
            for entry in iter_journal(f, source=str(run_dir.journal)):
                state.apply(entry)
                if _about(entry, step, key) or (step is None and _about(entry, key, "")):
                    mine.append(entry)  # the item, or (a plain step named by its id) the step's one call
    except JournalCorrupt:
        pass  # what comes before the damage is shown; `show` says where the journal is damaged
    except OSError as exc:
        raise UsageError(f"cannot read {run_dir.journal}: {exc.strerror or exc}") from None
    found = [(sid, s.items[key]) for sid, s in state.steps.items() if key in s.items and step in (None, sid)]
    if not found and step is None and key in state.steps and "" in state.steps[key].items:
        found = [(key, state.steps[key].items[""])]
    if not found:
        raise UsageError(_unknown(state, key, step, run_dir.run_id))
    if len(found) > 1:
        steps = ", ".join(sid for sid, _ in found)
        raise UsageError(f"item {key!r} is in steps {steps}: say which with --step STEP")
    sid, item = found[0]
    key = item.key
    mine = [entry for entry in mine if _about(entry, sid, key)]
    status = item.status.value
    if item.status is ItemStatus.DISPATCHED:
        status = "running" if live else "in-doubt"
    record = ItemRecord(sid, key, item.index, status, item.kind.value if item.kind else None, item.error)
    record.attempts = item.attempts
    for entry in mine:
        event: Any = entry.event
        if event.type == "item_dispatched":
            record.server, record.tool = event.server, event.tool
        if event.type in ("item_succeeded", "item_failed"):
            record.result = event.result
        record.events.append({k: v for k, v in encode(entry).items() if k != "result"})
    return record


def _unknown(state: Any, key: str, step: str | None, run_id: str) -> str:
    import difflib

    keys = [k or sid for sid, s in state.steps.items() if step in (None, sid) for k in s.items]
    # A key is often a path or a URL, given by its last part: keys that end with it come first.
    close = [k for k in keys if k.endswith(key) and k != key][:3] or difflib.get_close_matches(
        key, keys, n=3, cutoff=0.6
    )
    where = f" of step {step!r}" if step is not None else ""
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"no item {key!r}{where} in run {run_id}{hint}"


def render_item(record: ItemRecord) -> str:
    """The text of ``show --item``."""
    from runner.cli.runtext import format_event
    from runner.jsontext import dumps
    from runner.view.text import kind_words, one_line, where

    lines = [f"item {where(record.step, record.key or None)}: {record.status}"]
    if record.index is not None:
        lines.append(f"  index     {record.index}")
    if record.server is not None:
        lines.append(f"  call      {record.server} / {record.tool}, {record.attempts} attempt(s)")
    if record.error:
        lines.append(f"  error     {kind_words(record.kind)}: {one_line(record.error, 500)}")
    lines.append("  arguments not in the journal (rendered from the workflow when the call is made)")
    if record.result is not None:
        lines += ["", "result", *("  " + line for line in dumps(record.result, indent=2).splitlines())]
    lines += ["", f"events ({len(record.events)})"]
    for event in record.events:
        lines.append("  " + (format_event(event) or _event_line(event)))
    return "\n".join(lines)


def _event_line(event: dict[str, Any]) -> str:
    from runner.view.text import clock_time, one_line

    kind = event.get("type")
    when = clock_time(event.get("ts"))
    if kind == "item_dispatched":
        to = f"{event.get('server')} {event.get('tool')}"
        return f"{when} dispatched to {to}, attempt {event.get('attempt')}, request {event.get('request_id')}"
    if kind == "item_succeeded":
        return f"{when} succeeded"
    if kind == "item_failed":
        retry = (
            " (retrying" + (f" in {event['retry_in']} s)" if event.get("retry_in") else ")")
            if event.get("retrying")
            else ""
        )
        return f"{when} failed: {event.get('kind')}: {one_line(event.get('error'), 200)}{retry}"
    if kind == "doubt_decided":
        return f"{when} decided: {event.get('decision')}"
    if kind == "task_created":
        return f"{when} taken as task {event.get('task_id')}"
    if kind == "task_status":
        return f"{when} task {event.get('status')}" + (
            f": {one_line(event['message'], 200)}" if event.get("message") else ""
        )
    return f"{when} {kind}"


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--item", metavar="KEY", help="show one item: its status, result (or error) and events")
    parser.add_argument("--step", metavar="STEP", help="with --item: the step whose item it is (when keys repeat)")
