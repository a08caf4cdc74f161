"""Standard streams whose reader may go away: a run's exit code never depends on who reads its output.

``mcp-run FILE 2>&1 | head`` (or a log pipe that dies) closes the pipe a run writes its progress and summary
to. Without care, the next line raises ``BrokenPipeError`` in the middle of the run: its calls in flight are
cut (in doubt), and the command exits 0 with nothing said. Here a stream whose reader is gone swallows what
is written to it: its file descriptor is pointed at ``/dev/null`` (so the interpreter's last flush cannot fail
either), and the run goes on, journaled as ever, to the exit code it has.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

__all__ = ["ReaderMayLeave", "readers_may_leave"]


class ReaderMayLeave:
    """``stream``, except that writing to it once its reader has gone does nothing (``gone`` is then True)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._left()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._left()

    def _left(self) -> None:
        self.gone = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError):
            pass  # not a real file: nothing left to flush at exit either

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def readers_may_leave() -> Iterator[None]:
    """Within: ``sys.stdout`` and ``sys.stderr``, when they are not terminals, are :class:`ReaderMayLeave`
    (a terminal never closes under a running process: the live view keeps the stream it knows)."""
    saved = sys.stdout, sys.stderr
    if not _tty(sys.stdout):
        sys.stdout = ReaderMayLeave(sys.stdout)
    if not _tty(sys.stderr):
        sys.stderr = ReaderMayLeave(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def _tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
