"""The JSONL journal, sans-IO: reading its lines back into typed events (:mod:`runner.engine.events`).

The fold is :class:`runner.engine.state.RunState`; this module only reads.

One JSON object per line. Every line has ``seq`` (1, 2, 3, ... over the life of the run, resumes
included), ``ts`` (UTC, ISO 8601) and ``type``; most name the ``step`` and, in a fan-out, the ``item`` (its
key) and ``index`` they concern. The types, in the order a run writes them:

==================  ==========================================================================================
``run_started``     ``run_id``, ``workflow`` (absolute path), ``workflow_hash``, ``inputs`` (secrets masked),
                    ``fingerprints`` (step -> hash of its definition and its upstream steps), ``env`` (names
                    of the environment variables the run read, never their values), ``pid``, ``journal``
                    (the format that wrote it: 2; absent means 1, whose fan-out keys are full hashes)
``run_resumed``     ``pid``, ``fingerprints``, ``allow_changed``, ``retry_failed``
``session_opened``  ``server``, ``protocol_version``, ``server_info``; after a reconnect also
                    ``reconnects`` and ``down_s``
``session_lost``    ``server``, ``error``: the session in use was lost (the server went away)
``session_retrying`` ``server``, ``attempt``, ``delay_s`` (the next attempt starts after exactly this),
                    ``remaining_s``, ``error``
``session_failed``  ``server``, ``error``, ``kind``: given up; the items it would have run are left undone
``step_started``    ``step``, ``items`` (fan-out size) when it fans out, ``reused`` (results a resume
                    takes from the journal)
``step_skipped``    ``step``, ``reason`` (in words), ``cause`` (``if-false``, ``dependency-skipped``, ``failure``
                    or ``unfinished``: see ``SkipCause``)
``item_dispatched`` ``step``, ``item``, ``index``, ``server``, ``tool``, ``request_id``, ``progress_token``,
                    ``attempt``; written *before* the request goes out (and fsynced first, unless the
                    call is safe to repeat)
``progress``        ``step``, ``item``, ``progress``, ``total``, ``message``
``log``             ``server``, ``level``, ``logger``, ``data``, and ``step``/``item`` when known
``stream_resumed``  ``step``, ``item``, ``last_event_id``
``item_succeeded``  ``step``, ``item``, ``index``, ``result`` (the MCP result)
``item_failed``     ``step``, ``item``, ``index``, ``kind`` (see ``FailureKind``), ``error``, ``result``,
                    ``retrying``, ``retry_in``
``step_finished``   ``step``, ``status``, ``counts``; ``error`` and ``kind`` when it failed as a whole
``run_finished``    ``status`` (``succeeded`` or ``failed``), ``exit_code``, ``outputs``: the run is closed
``run_stopped``     ``status`` (``in-doubt`` or ``incomplete``), ``exit_code``, ``outputs``: the run ended
                    without a definite answer for every item; it stays open (resumable)
``run_interrupted`` ``status``, ``exit_code``: the run stopped on a signal; it stays open (resumable)
==================  ==========================================================================================

**Open and closed runs.** A run is *closed* only when every item has a definite answer: its last run-level
record is ``run_finished`` with status ``succeeded`` or ``failed`` (:func:`closes`). Anything else (a
run in doubt, incomplete because a server could not be reached, interrupted, or crashed) is *open*: a
resume continues it and no new run of the workflow starts while it is open. A closed ``failed`` run can be
reopened by ``--retry-failed`` (its ``run_resumed`` record says ``retry_failed``). Journals of earlier
versions that closed a run as ``in-doubt`` with ``run_finished`` read as open.

Folding never trusts what it cannot see: an item is *succeeded* only with its ``item_succeeded`` line; an
item whose last record is ``item_dispatched`` is *dispatched* (in flight while the run's process lives, **in
doubt** once it is gone), and one whose last record is ``item_failed`` of kind ``cancelled``, ``timeout`` or
``outcome-unknown`` is in doubt: the server may or may not have run it. One that a resume skipped
(``skipped-in-doubt``) stays skipped: that decision is not undone by a later resume.

A torn last line (the process died mid-write: no final newline) is ignored on read; any other line that is
not an event (not JSON, not an object, a wrong-typed field, an unknown type) is ``JournalCorrupt`` naming its
line number. A journal written in a newer format (``run_started.journal``) is refused by name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from runner.engine.events import JOURNAL_FORMAT, Entry, RunFinished, RunStarted, RunStatus, decode
from runner.engine.state import RunState, fold
from runner.errors import McpRunError
from runner.exitcodes import ExitCode

__all__ = [
    "JournalCorrupt",
    "closes",
    "iter_journal",
    "parse_journal",
    "peek_journal",
    "read_journal",
]


class JournalCorrupt(McpRunError):
    """A journal line that is not an event (and not the torn last line of a crash), or a journal of a newer
    format."""

    exit_code = ExitCode.USAGE


def closes(entry: Entry | None) -> bool:
    """Whether ``entry``, a run's last record, closes it (see the module docstring)."""
    if entry is None or not isinstance(entry.event, RunFinished):
        return False
    try:
        return RunStatus(entry.event.status).closed
    except ValueError:
        return False


def iter_journal(
    lines: Iterable[bytes], *, source: str = "journal.jsonl", unmask: Callable[[str], str] | None = None
) -> Iterator[Entry]:
    """Entries from journal lines (each with its newline), lazily: a 100,000-event journal is never held as
    a list. A last line without its newline is a torn write and is skipped; any other bad line raises
    ``JournalCorrupt`` naming it."""
    line_no = 0
    for line in lines:
        line_no += 1
        if not line.endswith(b"\n"):
            return  # torn tail: the process died mid-write
        if not line.strip():
            continue
        try:
            obj = json.loads(unmask(line.decode()) if unmask is not None and b"***" in line else line)
        except (ValueError, RecursionError) as exc:
            raise JournalCorrupt(f"{source}:{line_no}: corrupt journal line ({exc})") from None
        if not isinstance(obj, dict):
            raise JournalCorrupt(f"{source}:{line_no}: journal line is not an event object")
        try:
            entry = decode(obj)
        except ValueError as exc:
            raise JournalCorrupt(f"{source}:{line_no}: not a journal event: {exc}") from None
        if isinstance(entry.event, RunStarted) and (entry.event.journal or 1) > JOURNAL_FORMAT:
            raise JournalCorrupt(
                f"{source}: written by a newer mcp-run (journal format {entry.event.journal}; this one reads "
                f"format {JOURNAL_FORMAT}): inspect or resume it with that version"
            )
        yield entry


def parse_journal(data: bytes, *, source: str = "journal.jsonl") -> tuple[list[Entry], int]:
    """Parse journal bytes into entries. Returns them and the length of the valid prefix (up to and
    including the last complete line), which is where a resume appends after cutting a torn tail."""
    end = data.rfind(b"\n") + 1
    return list(iter_journal(data[:end].splitlines(keepends=True), source=source)), end


def read_journal(
    path: Path, *, keep_results: set[str] | None = None, unmask: Callable[[str], str] | None = None
) -> RunState:
    """Fold the journal file at ``path`` line by line."""
    with path.open("rb") as f:
        return fold(iter_journal(f, source=str(path), unmask=unmask), keep_results=keep_results)


def peek_journal(path: Path) -> tuple[Entry | None, Entry | None]:
    """The first and the last complete entries of a journal, reading only its ends (for `runs` and for
    finding an unfinished run among many). A line that does not decode reads as None."""
    with path.open("rb") as f:
        first_line = f.readline()
        size = f.seek(0, 2)
        tail = b""
        if size:
            f.seek(max(0, size - 65536))
            tail = f.read()
    first = _entry_or_none(first_line)
    end = tail.rfind(b"\n")
    if end < 0:
        return first, None
    start = tail.rfind(b"\n", 0, end) + 1
    return first, _entry_or_none(tail[start : end + 1])


def _entry_or_none(line: bytes) -> Entry | None:
    if not line.endswith(b"\n"):
        return None
    try:
        obj = json.loads(line)
        return decode(obj) if isinstance(obj, dict) else None
    except (ValueError, RecursionError):
        return None
