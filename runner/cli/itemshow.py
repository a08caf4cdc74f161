"""``mcp-run show [WORKFLOW] [RUN_ID] --item KEY [--step STEP]``: one item of a run, from its journal alone: where
it stands, its result (or error) and every event that names it, in order.

The journal holds what was sent as the item's dispatch (server, tool, request id, attempt), not the arguments
themselves (they are rendered from the workflow when the call is made); its text is read as shown, secrets
masked as the journal holds them. A plain step's one call is named by the step's id.

The arguments are rendered again (:func:`arguments_now`): from the workflow file as it is now, with the run's
journaled inputs (a secret one as the placeholder the journal holds) and the results its earlier steps journaled,
by the function the engine renders with (:func:`~runner.engine.core.items.rendered_args`), then masked; and
said to be so. When the step's fingerprint now is not the journaled one (the file, its inputs or an upstream
step changed), they may differ from what was sent: that is said instead of printing them.
"""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.errors import UsageError

if TYPE_CHECKING:
    from runner.engine.core.events import Entry
    from runner.engine.core.state import RunState
    from runner.engine.journal.rundir import RunDir
    from runner.workflow.plan import Plan

__all__ = ["Arguments", "ItemRecord", "arguments_now", "item_record", "render_item"]

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
    arguments: Arguments | None = None

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
            "arguments": self.arguments.to_json() if self.arguments is not None else None,
        }


@dataclass
class Arguments:
    """An item's arguments as rendered now (:func:`arguments_now`): ``args`` (masked), or None with ``note``
    saying why they are not shown; ``source``: the workflow file they were rendered from."""

    source: str | None
    args: Any = None
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"rendered_from": self.source, "args": self.args, "note": self.note}


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
    record.arguments = arguments_now(run_dir, sid, key)
    for entry in mine:
        event: Any = entry.event
        if event.type == "item_dispatched":
            record.server, record.tool = event.server, event.tool
        if event.type in ("item_succeeded", "item_failed"):
            record.result = event.result
        record.events.append({k: v for k, v in encode(entry).items() if k != "result"})
    return record


def arguments_now(run_dir: RunDir, sid: str, key: str) -> Arguments:
    """Item ``key`` of step ``sid``'s arguments rendered again (see the module docstring); never raises: what
    stops them is said in the ``note``."""
    from runner.engine.core.events import RunStarted
    from runner.errors import McpRunError

    first, _damage = run_dir.head()
    if first is None or not isinstance(first.event, RunStarted) or first.event.workflow is None:
        return Arguments(None, note="the journal names no workflow file")
    source = first.event.workflow
    try:
        return _arguments(run_dir, Path(source), first.event.inputs, sid, key)
    except (McpRunError, OSError, ValueError) as exc:
        from runner.errors import first_line

        return Arguments(source, note=f"they cannot be rendered from {source} now: {first_line(exc)}")


def _arguments(run_dir: RunDir, source: Path, recorded: dict[str, Any], sid: str, key: str) -> Arguments:
    from runner.engine.calls.args import args_renderer
    from runner.engine.core.items import ArgsFailed, rendered_args
    from runner.engine.runctl import env_context
    from runner.masking import Masker
    from runner.secrets_of import collect_secrets
    from runner.workflow.fingerprints import fingerprints
    from runner.workflow.loader import validate

    if not source.is_file():
        return Arguments(str(source), note=f"the workflow file {source} is not there now")
    declared = validate(str(source)).workflow.inputs
    # The journaled inputs, a secret one as the placeholder the journal holds (what it renders to is masked).
    inputs = {name: value for name, value in recorded.items() if name in declared}
    plan = validate(str(source), inputs_file=inputs or None)
    inputs = dict(plan.input_values or {})
    ps = plan.steps.get(sid)
    if ps is None:
        return Arguments(str(source), note=f"{source} has no step {sid!r} now")
    needed = _upstream(plan, sid)
    state = _fold(run_dir, needed)
    journaled = state.fingerprints.get(sid)
    if journaled is None or fingerprints(plan, inputs).get(sid) != journaled:
        return Arguments(
            str(source),
            note=f"step {sid!r} of {source} is not the one the run called (its definition, an input or an upstream "
            "step changed): its arguments may differ from those sent",
        )
    env = env_context(plan)
    context = _Context(plan, state, inputs, env)
    for upstream in plan.order:
        if upstream in needed and upstream != sid:
            context.add_view(upstream)
    item, index = context.item_of(sid, key)
    args = rendered_args(args_renderer(ps, context.of), item, index)
    if isinstance(args, ArgsFailed):
        return Arguments(str(source), note=f"they do not render now: {args.error}")
    masker = Masker(collect_secrets(plan, inputs, env))
    return Arguments(str(source), args=masker.mask_value(args))


def _upstream(plan: Plan, sid: str) -> set[str]:
    """``sid`` and every step it depends on, however far up."""
    found: set[str] = set()
    todo = [sid]
    while todo:
        step = todo.pop()
        if step not in found:
            found.add(step)
            todo.extend(plan.steps[step].dependencies)
    return found


def _fold(run_dir: RunDir, keep: set[str]) -> RunState:
    from runner.engine.core.state import RunState
    from runner.engine.journal.reader import JournalCorrupt, iter_journal

    state = RunState(keep_results=keep)
    with run_dir.journal.open("rb") as f, contextlib.suppress(JournalCorrupt):
        for entry in iter_journal(f, source=str(run_dir.journal)):
            state.apply(entry)
    return state


class _Context:
    """What templates read, rebuilt from the journal: the views of the steps already ended, as the step machine
    made them (:meth:`~runner.engine.core.steps.StepMachine.finish`), from their journaled results."""

    def __init__(self, plan: Plan, state: RunState, inputs: dict[str, Any], env: dict[str, str | None]) -> None:
        self._plan = plan
        self._state = state
        self._inputs = inputs
        self._env = env
        self._views: dict[str, Any] = {}

    def of(self, item: Any = None, index: int | None = None) -> dict[str, Any]:
        from runner.workflow.context import make_context

        return make_context(inputs=self._inputs, env=self._env, steps=self._views, item=item, index=index)

    def items(self, sid: str) -> tuple[list[Any], list[str]]:
        from runner.engine.core.items import step_keys
        from runner.masking import placeholders

        ps = self._plan.steps[sid]
        if not ps.fan_out:
            return [None], [""]
        items = ps.render_items(self.of())
        full_hash = self._state.journal_format < 2
        return items, step_keys(ps, items, self.of, secrets_in=placeholders, full_hash=full_hash)

    def item_of(self, sid: str, key: str) -> tuple[Any, int | None]:
        items, keys = self.items(sid)
        if not self._plan.steps[sid].fan_out:
            return None, None
        if key not in keys:
            raise ValueError(f"no item {key!r} among the items step {sid!r} renders now")
        index = keys.index(key)
        return items[index], index

    def add_view(self, sid: str) -> None:
        from runner.engine.core.steps import view_status
        from runner.engine.core.vocabulary import ItemStatus, StepStatus
        from runner.workflow.context import fanout_view, identified, item_entry, step_view

        step = self._state.steps.get(sid)
        status = step.status if step is not None else StepStatus.SKIPPED
        if status is StepStatus.SKIPPED or step is None:
            ps = self._plan.steps[sid]
            self._views[sid] = fanout_view([], [], "skipped") if ps.fan_out else step_view(None, status="skipped")
            return
        items, keys = self.items(sid)
        entries: list[Any] = []
        for k in keys:
            found = step.items.get(k)
            if found is None:
                entries.append(None)
                continue
            ok = found.status is ItemStatus.SUCCEEDED
            entries.append(item_entry("succeeded" if ok else "failed", found.error, found.result))
        if self._plan.steps[sid].fan_out:
            results: list[Any] = [identified(entries[i], items[i], keys[i], i) for i in range(len(entries))]
            self._views[sid] = fanout_view(items, results, view_status(status))
        else:
            view = entries[0] or step_view(None, status=view_status(status))
            view.pop("error", None)
            self._views[sid] = view


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
    arguments = record.arguments
    if arguments is not None and arguments.args is not None:
        lines += ["", f"arguments (as rendered from {arguments.source} now; the journal does not hold them)"]
        lines += ["  " + line for line in dumps(arguments.args, indent=2).splitlines()]
    else:
        why = arguments.note if arguments is not None else None
        lines.append(f"  arguments not shown: {why or 'the journal does not hold them'}")
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
