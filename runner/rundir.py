"""Run directories under the state directory: ids that sort by time, locks, and finding runs again.

Layout::

    <state-dir>/runs/<run-id>/journal.jsonl     the journal (0600)
    <state-dir>/runs/<run-id>/lock              flock'ed by the process running the run; holds its pid

The state directory is ``--state-dir``, else ``$MCP_RUN_STATE_DIR``, else ``.mcp-run/`` beside the workflow
file (for commands that take no workflow: ``./.mcp-run``). Directories are 0700, files 0600.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from runner.errors import BusyError, McpRunError, UsageError
from runner.journal import CLOSED_STATUSES, RunState, peek_journal, read_journal

__all__ = ["RunDir", "RunLock", "RunSummary", "list_runs", "new_run_id", "resolve_state_dir"]

JOURNAL = "journal.jsonl"
LOCK = "lock"


def resolve_state_dir(flag: str | None, workflow: Path | None) -> Path:
    if flag:
        return Path(flag)
    env = os.environ.get("MCP_RUN_STATE_DIR")
    if env:
        return Path(env)
    if workflow is not None:
        return workflow.resolve().parent / ".mcp-run"
    return Path(".mcp-run")


_last_micros = 0


def new_run_id() -> str:
    """``20261129T213512.123456Z-3f9a1c``: sorts by start time (strictly, within one process), unique across
    processes thanks to the random suffix."""
    global _last_micros
    micros = max(time.time_ns() // 1000, _last_micros + 1)
    _last_micros = micros
    seconds = datetime.fromtimestamp(micros // 1_000_000, UTC)
    return seconds.strftime("%Y%m%dT%H%M%S.") + f"{micros % 1_000_000:06d}Z-" + secrets.token_hex(3)


class RunLock:
    """An exclusive ``flock`` on a run directory's lock file, holding the owner's pid."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            who = f"process {pid}" if pid else "another process"
            raise BusyError(f"run {self.path.parent.name} is in use by {who}", pid=pid) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


def is_locked(run_dir: Path) -> int | None:
    """The pid holding the run, or None when no process does (finished or crashed)."""
    path = run_dir / LOCK
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_pid(fd) or -1
    finally:
        os.close(fd)
    return None


@dataclass
class RunDir:
    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def journal(self) -> Path:
        return self.path / JOURNAL

    @classmethod
    def create(cls, state_dir: Path) -> RunDir:
        runs = state_dir / "runs"
        runs.mkdir(parents=True, exist_ok=True, mode=0o700)
        for folder in (state_dir, runs):
            os.chmod(folder, 0o700)
        while True:
            path = runs / new_run_id()
            try:
                path.mkdir(mode=0o700)
            except FileExistsError:
                continue
            return cls(path)

    def lock(self) -> RunLock:
        lock = RunLock(self.path / LOCK)
        lock.acquire()
        return lock

    def open_for_append(self) -> int:
        """Open the journal for appending after cutting a torn tail (call under the lock), so that what a
        resume appends starts on a line of its own and the journal reads cleanly after a second crash."""
        fd = os.open(self.journal, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        size = os.fstat(fd).st_size
        if size:
            tail = os.pread(fd, min(size, 1 << 20), max(0, size - (1 << 20)))
            if not tail.endswith(b"\n"):
                cut = tail.rfind(b"\n")
                valid = size - len(tail) + cut + 1 if cut >= 0 else _last_newline(fd, size - len(tail))
                os.ftruncate(fd, valid)
                os.fsync(fd)
        return fd

    def read(self, *, keep_results: set[str] | None = None, unmask: Callable[[str], str] | None = None) -> RunState:
        return read_journal(self.journal, keep_results=keep_results, unmask=unmask)


def _last_newline(fd: int, before: int) -> int:
    """Length of the journal up to its last newline before offset ``before`` (a torn line over 1 MiB)."""
    while before > 0:
        start = max(0, before - (1 << 20))
        chunk = os.pread(fd, before - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        before = start
    return 0


@dataclass
class RunSummary:
    run_dir: RunDir
    state: RunState
    running_pid: int | None

    @property
    def status(self) -> str:
        if self.running_pid is not None:
            return "running"
        if self.state.status is None:
            return "interrupted"
        return self.state.status


def iter_run_dirs(state_dir: Path) -> Iterator[RunDir]:
    runs = state_dir / "runs"
    if not runs.is_dir():
        return
    for path in sorted(runs.iterdir()):
        if (path / JOURNAL).is_file():
            yield RunDir(path)


def list_runs(state_dir: Path) -> list[RunSummary]:
    out = []
    for run_dir in iter_run_dirs(state_dir):
        try:
            state = run_dir.read(keep_results=set())
        except McpRunError:  # a corrupt journal is shown as such, not a crash of `runs`
            state = RunState(run_id=run_dir.run_id, status="corrupt")
        out.append(RunSummary(run_dir, state, is_locked(run_dir.path)))
    return out


def unfinished_runs(state_dir: Path, workflow: Path) -> list[RunDir]:
    """Unfinished runs of this workflow file (matched by absolute path), oldest first. Reads only the ends
    of each journal: a run is closed when its last complete event is ``run_finished`` with a closed status
    (see :mod:`runner.journal`)."""
    target = str(workflow.resolve())
    found = []
    for run_dir in iter_run_dirs(state_dir):
        first, last = peek_journal(run_dir.journal)
        if first is None or first.get("type") != "run_started" or first.get("workflow") != target:
            continue
        if last is not None and last.get("type") == "run_finished" and last.get("status") in CLOSED_STATUSES:
            continue
        found.append(run_dir)
    return found


def find_run(state_dir: Path, run_id: str) -> RunDir:
    path = state_dir / "runs" / run_id
    if not (path / JOURNAL).is_file():
        known = [r.run_id for r in iter_run_dirs(state_dir)]
        hint = f"; known runs: {', '.join(known[-5:])}" if known else ""
        raise UsageError(f"no run {run_id!r} in {state_dir}{hint}")
    return RunDir(path)


def prune(state_dir: Path, keep: int) -> list[str]:
    """Remove all but the newest ``keep`` finished runs; never a running, unfinished or unreadable one."""
    finished = [
        s for s in list_runs(state_dir) if s.running_pid is None and s.state.finished and s.state.status != "corrupt"
    ]
    doomed = finished[: max(0, len(finished) - keep)]
    for summary in doomed:
        shutil.rmtree(summary.run_dir.path)
    return [s.run_dir.run_id for s in doomed]
