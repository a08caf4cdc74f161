"""Helpers shared by tests: typed journal entries from short dicts, folding them, and journal lines.

``entry({"type": "item_dispatched", "step": "s", "item": "k"}, seq=3)`` fills the fields a test does not care
about (a server, a tool, a request id, ...) so that tests say only what matters to them; the result is
decoded like a journal line, so it is checked like one.

``sigint_default`` is the ``preexec_fn`` of every child a test interrupts with SIGINT (see its docstring).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runner.engine.core.events import Entry, decode, encode
from runner.engine.core.state import RunState

TS = "2026-01-01T00:00:00.000Z"

_DEFAULTS: dict[str, dict[str, Any]] = {
    "run_started": {
        "run_id": "r",
        "workflow": "/w.yaml",
        "workflow_hash": "h",
        "inputs": {},
        "fingerprints": {},
        "env": [],
        "pid": 1,
    },
    "run_resumed": {"pid": 1, "fingerprints": {}, "allow_changed": False},
    "session_opened": {"server": "s", "protocol_version": "2025-11-25", "server_info": {}},
    "session_lost": {"server": "s", "error": "lost"},
    "session_retrying": {"server": "s", "attempt": 1, "delay_s": 0.5, "remaining_s": 300.0, "error": "down"},
    "session_failed": {"server": "s", "kind": "connection-before-send", "error": "down"},
    "step_started": {},
    "step_skipped": {"reason": "because"},
    "item_dispatched": {
        "item": "",
        "index": None,
        "server": "s",
        "tool": "t",
        "request_id": 1,
        "progress_token": 1,
        "attempt": 1,
    },
    "progress": {"item": "", "progress": 1},
    "log": {"server": "s", "level": "info"},
    "stream_resumed": {"item": "", "last_event_id": "e1"},
    "task_created": {"item": "", "index": None, "server": "s", "task_id": "t1"},
    "task_status": {"item": "", "task_id": "t1", "status": "working"},
    "item_succeeded": {"item": "", "index": None, "result": {"content": []}},
    "item_failed": {"item": "", "kind": "tool-error", "error": "failed"},
    "doubt_decided": {"keys": [""], "decision": "skip"},
    "item_reconciled": {"item": "", "verdict": "done"},
    "server_throttled": {"server": "s", "status": 429, "pause_s": 1.0, "limit": 4},
    "step_finished": {"status": "succeeded", "counts": {}},
    "run_finished": {"status": "succeeded", "exit_code": 0},
    "run_stopped": {"status": "in-doubt", "exit_code": 5},
    "run_interrupted": {"status": "interrupted", "exit_code": 130},
}


def entry(fields: dict[str, Any], *, seq: int = 1, ts: str = TS) -> Entry:
    """A typed entry from ``fields`` (``type`` and what matters), the rest filled with defaults."""
    kind = fields["type"]
    obj = {"seq": fields.get("seq", seq), "ts": fields.get("ts", ts), **_DEFAULTS.get(kind, {}), **fields}
    return decode(obj)


def entries(items: Iterable[dict[str, Any]]) -> list[Entry]:
    """Entries numbered 1, 2, 3, ... unless they carry their own ``seq``."""
    return [entry(fields, seq=n) for n, fields in enumerate(items, start=1)]


def folded(items: Iterable[dict[str, Any] | Entry]) -> RunState:
    """A RunState that applied ``items`` in order (dicts numbered 1, 2, 3, ... by position)."""
    state = RunState()
    for n, item in enumerate(items, start=1):
        state.apply(item if isinstance(item, Entry) else entry(item, seq=n))
    return state


def journal_line(**event: Any) -> bytes:
    """One journal line: ``event`` with the fields it leaves out filled in (as :func:`entry` does)."""
    return json.dumps(encode(entry(event))).encode() + b"\n"


def sample_journal() -> bytes:
    """A journal of twelve lines: a run started, three items of step ``a`` succeeded (each with a progress
    note), ``k4`` dispatched with no result (in doubt once its process is gone) and ``k5`` failed."""
    parts = [journal_line(seq=1, type="run_started", run_id="r", workflow="/w.yaml", fingerprints={"a": "1"})]
    seq = 2
    for key in ("k1", "k2", "k3"):
        parts.append(journal_line(seq=seq, type="item_dispatched", step="a", item=key, request_id=seq))
        seq += 1
        parts.append(journal_line(seq=seq, type="progress", step="a", item=key, progress=1))
        seq += 1
        parts.append(journal_line(seq=seq, type="item_succeeded", step="a", item=key, result={"content": []}))
        seq += 1
    parts.append(journal_line(seq=seq, type="item_dispatched", step="a", item="k4", request_id=seq))
    parts.append(journal_line(seq=seq + 1, type="item_failed", step="a", item="k5", kind="tool-error", error="x"))
    return b"".join(parts)


def write_big_journal(
    path: Path, items: int, *, result_chars: int = 300, log_every: int = 10, log_chars: int = 100, ended: bool = True
) -> None:
    """A journal of one fan-out of ``items`` calls that all succeeded, each with a result of ``result_chars``
    characters and a log message of ``log_chars`` every ``log_every`` items; with ``ended``, its end record
    (with its counts, as a run writes it), else none (a crash). 90,000 items of 300 make about 64 MB."""
    seq = 0

    def line(fields: dict[str, Any]) -> str:
        nonlocal seq
        seq += 1
        ts = f"2026-01-01T00:{seq // 60 % 60:02d}:{seq % 60:02d}.000Z"
        return json.dumps({"seq": seq, "ts": ts, **fields}) + "\n"

    with path.open("w") as f:
        f.write(line({**_DEFAULTS["run_started"], "type": "run_started", "journal": 2}))
        f.write(line({"type": "step_started", "step": "each", "items": items}))
        for i in range(items):
            key = f"doc-{i:06d}"
            dispatched = {**_DEFAULTS["item_dispatched"], "type": "item_dispatched", "step": "each", "item": key}
            f.write(line({**dispatched, "index": i, "request_id": i + 2, "progress_token": i + 2}))
            if log_every and i % log_every == 0:
                data = f"converting {key} " + "x" * log_chars
                log = {"type": "log", "server": "s", "level": "info", "data": data, "step": "each", "item": key}
                f.write(line(log))
            result = {"content": [{"type": "text", "text": "y" * result_chars}], "isError": False}
            f.write(line({"type": "item_succeeded", "step": "each", "item": key, "index": i, "result": result}))
        counts = {"total": items, "succeeded": items, "failed": 0}
        f.write(line({"type": "step_finished", "step": "each", "status": "succeeded", "counts": counts}))
        if ended:
            totals = {"succeeded": items, "failed": 0, "in_doubt": 0}
            f.write(line({"type": "run_finished", "status": "succeeded", "exit_code": 0, "counts": totals}))


def sigint_default() -> None:
    """The ``preexec_fn`` of a child that a test interrupts with SIGINT: SIGINT's default disposition in the
    child, whatever the test process has. An ignored signal stays ignored across ``exec``, and Python then
    installs no ``KeyboardInterrupt`` handler; a test process started as a background job of a non-interactive
    shell (``cmd &``) ignores SIGINT, and its child would never see the test's Ctrl-C. It runs in the child
    between fork and exec: it only resets a disposition (no import, no lock)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
