"""The JSONL journal, sans-IO: reading its lines back into typed events (:mod:`runner.engine.core.events`).

The fold is :class:`runner.engine.core.state.RunState`; this module only reads.

One JSON object per line. Every line has ``seq`` (1, 2, 3, ... over the life of the run, resumes
included), ``ts`` (UTC, ISO 8601) and ``type``; most name the ``step`` and, in a fan-out, the ``item`` (its
key) and ``index`` they concern. The types, in the order a run writes them:

==================  ==========================================================================================
``run_started``     ``run_id``, ``workflow`` (absolute path), ``workflow_hash``, ``inputs`` (secrets masked),
                    ``fingerprints`` (step -> hash of its definition and its upstream steps), ``env`` (names
                    of the environment variables the run read, never their values), ``pid``, ``journal``
                    (the format that wrote it: 3; absent means 1, whose fan-out keys are full hashes; before
                    3 text was masked, not encoded), ``secret_inputs`` (inputs never written)
``run_resumed``     ``pid``, ``fingerprints``, ``allow_changed``, ``retry_failed``
``session_opened``  ``server``, ``protocol_version``, ``server_info``; after a reconnect also
                    ``reconnects`` and ``down_s``
``session_lost``    ``server``, ``error``: the session in use was lost (the server went away)
``session_retrying`` ``server``, ``attempt``, ``delay_s`` (the next attempt starts after exactly this),
                    ``remaining_s``, ``error``
``session_failed``  ``server``, ``error``, ``kind``: given up; the items it would have run are left undone
``server_throttled`` ``server``, ``status`` (429 or 503), ``pause_s``, ``limit``, ``rate``, ``cut``: the server refused
                    a call for now; every call to it paused
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
``item_succeeded``  ``step``, ``item``, ``index``, ``result`` (the MCP result), ``cache`` (a cached step's
                    key digest) and ``reused_from`` (the run a cache hit took it from)
``item_failed``     ``step``, ``item``, ``index``, ``kind`` (see ``FailureKind``), ``error``, ``result``,
                    ``retrying``, ``retry_in``
``item_reconciled`` ``step``, ``item``, ``index``, ``verdict`` (``done``, ``not-done``, ``error``), ``result``,
                    ``error``: a step's reconcile tool settled an item in doubt (fsynced before it acts)
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

The three end records also carry ``counts``: the run's items as it ended (``succeeded``, ``failed``,
``in_doubt``), so that listing a run reads only the two ends of its journal (:mod:`runner.engine.journal.listing`).

**Damage.** A torn last line (the process died mid-write: no final newline) is ignored on read; any other
line that is not an event (not JSON, not an object, a wrong-typed field, an unknown type) is
``JournalCorrupt`` naming its file and line number (and the field at fault). A journal written in a newer
format (``run_started.journal``) is refused by name. A resume reads every line and refuses a journal with
such a line (:func:`read_journal` raises); ``show`` folds what comes before it (:func:`read_what_can_be_read`).
A journal whose first record is not a readable ``run_started`` cannot be known at all, not even its workflow
(:func:`first_record` raises; :func:`workflow_named` reads the line as text for a hint); one without a
complete line yet is a run that died writing its first record (nothing ran).

**Text.** Lines hold encoded text (:mod:`runner.masking`); each line is decoded as it is read: with the
run's masker (``unmask``: a resume, the secrets back in place) or as shown (placeholders kept, a server's
``***`` as it sent it). The format is the journal's (its ``run_started``); a lone line read without it (the
last record) is taken as of this version's format.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final

from runner.engine.core.events import JOURNAL_FORMAT, BadEvent, Entry, RunFinished, RunStarted, decode
from runner.engine.core.state import RunState, fold
from runner.errors import McpRunError
from runner.exitcodes import ExitCode
from runner.masking import Masker, decode_fields

__all__ = [
    "JournalCorrupt",
    "closes",
    "decode_first",
    "decode_line",
    "entry_or_none",
    "first_line",
    "first_record",
    "iter_journal",
    "last_record",
    "light_state",
    "parse_journal",
    "peek_journal",
    "read_journal",
    "read_what_can_be_read",
    "workflow_named",
]


class JournalCorrupt(McpRunError):
    """A journal line that is not an event (and not the torn last line of a crash), or a journal of a newer
    format. ``file`` and ``line`` say where (``line`` is None for a refusal of the whole journal), ``path``
    the field at fault when one is (``inputs``), ``message`` what is wrong; ``str()`` is
    ``file:line: message``."""

    exit_code = ExitCode.USAGE
    column: int | None = None
    suggestion: str | None = None

    def __init__(self, message: str, *, file: str, line: int | None = None, path: str | None = None) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.path = path
        super().__init__(f"{file}:{line}: {message}" if line is not None else f"{file}: {message}")


def closes(entry: Entry | None) -> bool:
    """Whether ``entry``, a run's last record, closes it (see the module docstring)."""
    if entry is None or not isinstance(entry.event, RunFinished):
        return False
    status = entry.event.status
    return status is not None and status.closed


def iter_journal(
    lines: Iterable[bytes],
    *,
    source: str = "journal.jsonl",
    unmask: Masker | None = None,
    first_line: int = 1,
) -> Iterator[Entry]:
    """Entries from journal lines (each with its newline), lazily: a 100,000-event journal is never held as
    a list. A last line without its newline is a torn write and is skipped; any other bad line raises
    ``JournalCorrupt`` naming it (``first_line`` is the number of the first of ``lines`` in the file). Text is
    decoded by ``unmask`` or as shown (the module docstring), in the format its ``run_started`` names."""
    line_no = first_line - 1
    journal = JOURNAL_FORMAT
    for line in lines:
        line_no += 1
        if not line.endswith(b"\n"):
            return  # torn tail: the process died mid-write
        if not line.strip():
            continue
        entry = decode_line(line, source=source, line_no=line_no, unmask=unmask, journal=journal)
        if isinstance(entry.event, RunStarted):
            journal = entry.event.journal or 1
        yield entry


def decode_line(
    line: bytes,
    *,
    source: str = "journal.jsonl",
    line_no: int = 1,
    unmask: Masker | None = None,
    journal: int = JOURNAL_FORMAT,
) -> Entry:
    """The entry one complete journal line holds, or ``JournalCorrupt`` naming ``source:line_no``. Its text is
    decoded (by ``unmask``, or as shown) as of format ``journal``; a ``run_started`` line, as of its own."""
    obj = _json_object(line, source, line_no)
    if b"***" in line:
        obj = _decoded_text(obj, unmask, journal, source, line_no)
    try:
        entry = decode(obj)
    except BadEvent as exc:
        raise JournalCorrupt(f"not an event: {exc}", file=source, line=line_no, path=exc.field) from None
    except RecursionError:
        raise JournalCorrupt("not an event: nested too deeply", file=source, line=line_no) from None
    if isinstance(entry.event, RunStarted) and (entry.event.journal or 1) > JOURNAL_FORMAT:
        raise JournalCorrupt(
            f"written by a newer mcp-run (journal format {entry.event.journal}; this one reads "
            f"format {JOURNAL_FORMAT}): inspect or resume it with that version",
            file=source,
            line=line_no,
            path="journal",
        )
    return entry


def _json_object(line: bytes, source: str, line_no: int) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise JournalCorrupt(f"not JSON ({_cut(str(exc))})", file=source, line=line_no) from None
    if not isinstance(obj, dict):
        raise JournalCorrupt(f"not an event: a JSON {type(obj).__name__}", file=source, line=line_no)
    return obj


def _decoded_text(
    obj: dict[str, Any], unmask: Masker | None, journal: int, source: str, line_no: int
) -> dict[str, Any]:
    """A line's fields with their text decoded as of format ``journal`` (a ``run_started``'s: its own)."""
    if obj.get("type") == "run_started":
        own = obj.get("journal")
        journal = own if isinstance(own, int) and not isinstance(own, bool) else 1
    try:
        return decode_fields(obj, unmask, journal=journal)
    except RecursionError:
        raise JournalCorrupt("not an event: nested too deeply", file=source, line=line_no) from None


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_journal(data: bytes, *, source: str = "journal.jsonl", first_line: int = 1) -> tuple[list[Entry], int]:
    """Parse journal bytes into entries. Returns them and the length of the valid prefix (up to and
    including the last complete line), which is where a resume appends after cutting a torn tail."""
    end = data.rfind(b"\n") + 1
    return list(iter_journal(data[:end].splitlines(keepends=True), source=source, first_line=first_line)), end


def read_journal(path: Path, *, keep_results: set[str] | None = None, unmask: Masker | None = None) -> RunState:
    """Fold the journal file at ``path`` line by line; ``JournalCorrupt`` at its first bad line."""
    with path.open("rb") as f:
        return fold(iter_journal(f, source=str(path), unmask=unmask), keep_results=keep_results)


def read_what_can_be_read(path: Path, state: RunState) -> JournalCorrupt | None:
    """Fold the journal at ``path`` into ``state`` line by line, up to its first bad line: returns the
    problem there (None when every line is an event). For inspecting a damaged run; a resume never folds
    part of a journal (:func:`read_journal` raises)."""
    try:
        with path.open("rb") as f:
            for entry in iter_journal(f, source=str(path)):
                state.apply(entry)
    except JournalCorrupt as exc:
        return exc
    return None


def light_state() -> RunState:
    """A state that folds a journal in memory bounded by its items, not its size: no results, no log
    messages (what listing a run needs)."""
    return RunState(keep_results=set(), logs=deque(maxlen=0))


def peek_journal(path: Path) -> tuple[Entry | None, Entry | None]:
    """The first and the last complete entries of a journal, reading only its ends (for `runs` and for
    finding an unfinished run among many). A line that does not decode reads as None."""
    with path.open("rb") as f:
        first_line = f.readline()
        last_line = _last_line(f)
    return entry_or_none(first_line), entry_or_none(last_line) if last_line else None


def last_record(path: Path) -> Entry | None:
    """The last complete entry of the journal at ``path`` (a torn tail is passed over), reading back from its
    end only as far as that line's start; None when there is none or it does not decode."""
    with path.open("rb") as f:
        return entry_or_none(_last_line(f))


def first_record(path: Path, *, unmask: Masker | None = None) -> Entry | None:
    """The first entry of the journal at ``path``: None when it has no complete line yet (the process died
    writing its first record: nothing ran); ``JournalCorrupt`` when that line is not an event, or the first
    event is not ``run_started`` (then the run cannot be known: not even its workflow). Its text is decoded
    by ``unmask``, or as shown."""
    line, line_no = first_line(path)
    return decode_first(line, source=str(path), line_no=line_no, unmask=unmask)


def first_line(path: Path) -> tuple[bytes, int]:
    """The first line of the journal at ``path`` that is not blank, and its number (a torn or empty one as it
    is): read once by a caller that decodes it twice (:func:`decode_first`)."""
    with path.open("rb") as f:
        line = f.readline()
        line_no = 1
        while line == b"\n":  # no writer leaves blank lines; the reader skips them all the same
            line, line_no = f.readline(), line_no + 1
    return line, line_no


def decode_first(line: bytes, *, source: str, line_no: int = 1, unmask: Masker | None = None) -> Entry | None:
    """A journal's first line (:func:`first_line`) as :func:`first_record` reads it."""
    if not line.endswith(b"\n"):
        return None
    entry = decode_line(line, source=source, line_no=line_no, unmask=unmask)
    if not isinstance(entry.event, RunStarted):
        raise JournalCorrupt(
            f"the first record is {entry.event.type}, not run_started", file=source, line=line_no, path="type"
        )
    return entry


# The value must end where a JSON value ends (``,`` or ``}`` next): a line torn inside the path and glued to the
# next line would otherwise read as a path that ends in ``{`` and name another workflow.
_WORKFLOW_FIELD: Final = re.compile(rb'"workflow"\s*:\s*("(?:[^"\\\n]|\\.){0,4096}")\s*[,}]')


def workflow_named(path: Path) -> str | None:
    """The workflow a journal's first line names, read as text (for a first record that does not decode:
    whose run it may be); None when the line does not say."""
    with path.open("rb") as f:
        line = f.readline(1 << 20)
    match = _WORKFLOW_FIELD.search(line)
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except ValueError:
        return None
    return value if isinstance(value, str) else None


_TAIL_CHUNK: Final = 1 << 16


def _last_line(f: BinaryIO) -> bytes:
    """The last complete line of the open file ``f`` (with its newline; a torn tail is passed over), reading
    back from its end only as far as that line's start; empty when there is none."""
    size = f.seek(0, 2)
    end = -1  # offset of the newline that ends the last complete line
    pos = size
    chunks: list[bytes] = []
    while pos > 0:
        start = max(0, pos - _TAIL_CHUNK)
        f.seek(start)
        chunk = f.read(pos - start)
        pos = start
        if end < 0:
            cut = chunk.rfind(b"\n")
            if cut < 0:
                continue
            end = start + cut
            chunk = chunk[: cut + 1]
            begin = chunk.rfind(b"\n", 0, cut)
        else:
            begin = chunk.rfind(b"\n")
        chunks.append(chunk[begin + 1 :] if begin >= 0 else chunk)
        if begin >= 0:
            break
    return b"".join(reversed(chunks)) if end >= 0 else b""


def entry_or_none(line: bytes) -> Entry | None:
    """The entry a complete journal line holds, decoded as shown; None for a torn line or one that does not
    decode (what the ends of a journal read as when listing runs)."""
    if not line.endswith(b"\n"):
        return None
    try:
        obj = json.loads(line)
        if not isinstance(obj, dict):
            return None
        if b"***" in line:
            own = obj.get("journal") if obj.get("type") == "run_started" else JOURNAL_FORMAT
            obj = decode_fields(obj, None, journal=own if isinstance(own, int) else 1)
        return decode(obj)
    except (ValueError, RecursionError):
        return None
