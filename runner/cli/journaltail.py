"""Following a journal as it is written, for ``mcp-run logs``: :class:`JournalTail` turns the bytes appended
to a journal into events (sans-IO), :func:`follow` reads the file a chunk at a time until the run ends."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.engine.journal.reader import JournalCorrupt

__all__ = ["READ_CHUNK", "JournalTail", "follow"]


class JournalTail:
    """Sans-IO: feed the bytes appended to a journal, get back the complete events (a partial last line waits
    for the rest). Lines are numbered from the start of the file; at a line that is not an event, the events
    before it are returned and :attr:`problem` says what is wrong there (nothing more is read)."""

    def __init__(self, source: str = "journal.jsonl") -> None:
        self._pending = b""
        self._line = 0
        self.source = source
        self.problem: JournalCorrupt | None = None
        self._format: int | None = None  # the journal's (its run_started says): how its text is decoded

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        return list(self.events(data))

    def events(self, data: bytes) -> Iterator[dict[str, Any]]:
        """:meth:`feed`, one event at a time (a chunk of a journal need not be held as events)."""
        from runner.engine.core.events import JOURNAL_FORMAT, RunStarted, encode
        from runner.engine.journal.reader import JournalCorrupt, decode_line

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
                entry = decode_line(
                    line, source=self.source, line_no=self._line, journal=self._format or JOURNAL_FORMAT
                )
            except JournalCorrupt as exc:
                self.problem = exc
                return
            if isinstance(entry.event, RunStarted):
                self._format = entry.event.journal or 1
            yield encode(entry)


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
