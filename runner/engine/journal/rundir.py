"""Run directories under the state directory: ids that sort by time, locks, and finding runs again.

Layout::

    <state-dir>/runs/<run-id>/journal.jsonl     the journal (0600)
    <state-dir>/runs/<run-id>/lock              flock'ed by the process running the run; holds its pid
    <state-dir>/locks/<key>.lock                flock'ed by the process running the workflow (any run of
                                                it), one file for each way of naming it (below); each holds
                                                its pid and run id as JSON

The state directory is ``--state-dir``, else ``$MCP_RUN_STATE_DIR``, else ``.mcp-run/`` beside the workflow
file when the command names one, else ``./.mcp-run`` (:func:`resolve_state_dir`). Directories are 0700,
files 0600.

**What "the same workflow" is** (:class:`WorkflowIdentity`). Within a state directory, a workflow is the
same when it has the same **identity**: its ``name:`` when it declares one, else its file's name
(``nightly.yaml``), wherever the file lies; or when it is the same **file** (device and inode: a hard
link, a bind mount); or when it is at the same **path** (what mcp-run before 0.2 matched on). So a project
folder moved with its ``.mcp-run/``, a new release directory beside a shared ``MCP_RUN_STATE_DIR`` and a
second name of the same file all find the same open run, and take the same lock. Two different workflows
that share a state directory and a file name must declare different names (``name:``): otherwise one's open run
makes the other refuse to start (never run twice, never mixed: a resume of another workflow's run is refused
as changed). Any of the three matches makes a run the workflow's: matching more can only make an invocation
refuse, matching less could make it start a new run beside an open one and call its tools again.

**One run at a time per workflow.** The workflow lock is taken *before* looking for an open run and held
until the run ends, so "is there an open run?" and "start a new one" are one atomic decision: of two
processes started together on the same workflow (and state directory), one runs and the other gets
:class:`WorkflowBusy`. The run lock stays: it is what ``runs``/``show`` test to tell a live run from a
dead one. Lock files are never deleted (deleting a lock file that another process is about to open breaks
the mutual exclusion).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from runner.engine.core.events import Entry, RunStarted
from runner.engine.core.state import RunState
from runner.engine.journal.reader import JournalCorrupt, closes, first_record, last_record, read_journal, workflow_named
from runner.errors import BusyError, UsageError

if TYPE_CHECKING:
    from runner.masking import Masker

__all__ = [
    "AmbiguousRun",
    "RunDir",
    "RunLock",
    "UnknownRun",
    "WorkflowBusy",
    "WorkflowIdentity",
    "WorkflowLock",
    "find_run",
    "identify",
    "new_run_id",
    "resolve_state_dir",
    "runs_of",
    "unfinished_runs",
]

JOURNAL = "journal.jsonl"
LOCK = "lock"
LOCKS = "locks"


def resolve_state_dir(flag: str | None, workflow: Path | None) -> Path:
    """The one rule for where runs are kept: ``flag`` (``--state-dir``), else ``$MCP_RUN_STATE_DIR``, else
    ``.mcp-run`` beside ``workflow`` when the command names one, else ``./.mcp-run``."""
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

    def acquire(self, *, wait: float = 0.0) -> None:
        """Take the lock, or raise :class:`BusyError`. ``wait`` (seconds) rides out a momentary holder:
        ``runs`` and ``show`` take a shared lock for an instant to see whether a run is live."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.005)
                    continue
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


class WorkflowBusy(BusyError):
    """Another process is running this workflow (it holds the workflow lock): ``pid`` and, once it has
    chosen one, the ``run_id`` it runs."""

    def __init__(self, message: str, *, pid: int | None, run_id: str | None, workflow: Path) -> None:
        super().__init__(message, pid=pid)
        self.run_id = run_id
        self.workflow = workflow


def workflow_key(workflow: Path) -> str:
    """A hash of a workflow's absolute path (symlinks resolved): the name of its path lock, and the key of its
    runs on Temporal (:mod:`runner.temporal.runids`)."""
    return _hash(os.fsencode(workflow.resolve()))  # a path need not be UTF-8


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class WorkflowIdentity:
    """What later invocations find a workflow's runs by (the module docstring says the rule): ``key`` is
    ``name:<its name:>`` or ``file:<its file's name>``; ``path`` its absolute path, symlinks resolved;
    ``device`` and ``inode`` its file's (None when it cannot be stat'ed)."""

    key: str
    path: str
    device: int | None = None
    inode: int | None = None

    @classmethod
    def of(cls, workflow: Path, name: str | None = None) -> WorkflowIdentity:
        """The identity of the workflow file at ``workflow`` that declares ``name`` (None: none)."""
        resolved = workflow.resolve()
        try:
            stat = os.stat(resolved)
        except OSError:
            device = inode = None
        else:
            device, inode = stat.st_dev, stat.st_ino
        key = f"name:{name}" if name else f"file:{resolved.name}"
        return cls(key, str(resolved), device, inode)

    def owns(self, started: RunStarted) -> bool:
        """Whether the run that ``started`` began is one of this workflow's: the same identity, file or path. A
        journal of an earlier version records only the path: its identity is taken as the file's name."""
        if started.workflow == self.path:
            return True
        if started.identity is not None:
            if started.identity == self.key:
                return True
        elif started.workflow is not None and self.key == f"file:{Path(started.workflow).name}":
            return True
        return self.inode is not None and (started.device, started.inode) == (self.device, self.inode)

    def may_own(self, named: str | None) -> bool:
        """Whether a run whose first line cannot be decoded, and names the workflow ``named`` (None: names
        none), may be one of this workflow's: counted in when in doubt."""
        return named is None or named == self.path or self.key == f"file:{Path(named).name}"

    def lock_names(self) -> list[str]:
        """The lock files to take, in this order (identity, path, file): any two invocations that could find
        the same run share at least one."""
        names = [_hash(self.key.encode("utf-8", "surrogateescape")), _hash(os.fsencode(self.path))]
        if self.inode is not None:
            names.append(f"file-{self.device}-{self.inode}")
        return names


def identify(workflow: Path | WorkflowIdentity) -> WorkflowIdentity:
    """``workflow``'s identity; for a path, its ``name:`` read from the file (a file that is not a valid
    workflow has none: it will not run, and its runs are still found by file name, path and inode)."""
    if isinstance(workflow, WorkflowIdentity):
        return workflow
    from runner.errors import WorkflowError
    from runner.workflow.loader import load_workflow

    try:
        name = load_workflow(workflow).workflow.name
    except (WorkflowError, OSError):
        name = None
    return WorkflowIdentity.of(workflow, name)


class WorkflowLock:
    """The per-workflow lock: an exclusive ``flock`` on each of ``<state-dir>/locks/<name>.lock`` for the names
    of :meth:`WorkflowIdentity.lock_names`, held from before a process looks for an open run until its run ends.

    Each file holds the holder's ``{"pid", "run_id", "running"}``: ``running`` is false while the holder is
    still deciding (a decision that may end without a run: "an unfinished run exists", "nothing to retry"),
    true once it has chosen to run (:meth:`set_running`). A process that finds a lock held waits (up to
    ``wait`` seconds) for a deciding holder, so that of two invocations started together the one that will
    not run never turns the one that would into a busy error; a running holder makes it busy at once."""

    def __init__(self, state_dir: Path, workflow: Path | WorkflowIdentity) -> None:
        self.identity = identify(workflow)
        self.workflow = Path(self.identity.path) if isinstance(workflow, WorkflowIdentity) else workflow
        self.paths = [state_dir / LOCKS / f"{name}.lock" for name in self.identity.lock_names()]
        self._fds: list[int] = []
        self._run_id: str | None = None
        self._running = False

    def acquire(self, *, wait: float = 0.0) -> WorkflowLock:
        """Take every lock, in order, or raise :class:`WorkflowBusy` (releasing those taken): at once when
        a holder runs the workflow, after ``wait`` seconds when it is still deciding."""
        ensure_state_dir(self.paths[0].parent.parent)
        deadline = time.monotonic() + wait
        try:
            for path in self.paths:
                self._fds.append(self._take(path, deadline))
        except BaseException:
            self.release()
            raise
        self._write()
        return self

    def _take(self, path: Path, deadline: float) -> int:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                holder = _read_holder(fd)
                if not holder.get("running") and time.monotonic() < deadline:
                    time.sleep(0.005)
                    continue
                os.close(fd)
                raise self._busy(holder) from None

    def _busy(self, holder: dict[str, object]) -> WorkflowBusy:
        pid, run_id = holder.get("pid"), holder.get("run_id")
        who = f"process {pid}" if isinstance(pid, int) else "another process"
        what = f" (run {run_id})" if isinstance(run_id, str) else ""
        return WorkflowBusy(
            f"{who} is running workflow {self.workflow}{what}",
            pid=pid if isinstance(pid, int) else None,
            run_id=run_id if isinstance(run_id, str) else None,
            workflow=self.workflow,
        )

    def set_running(self, run_id: str | None) -> None:
        """This process runs the workflow (the run ``run_id``, when it has one yet): from now on, whoever
        finds the lock held is busy at once."""
        self._running = True
        self._run_id = run_id
        self._write()

    def _write(self) -> None:
        record = {"pid": os.getpid(), "run_id": self._run_id, "running": self._running}
        data = json.dumps(record).encode() + b"\n"
        for fd in self._fds:
            # Overwrite, then cut: a reader sees the old record, the new one, or (for an instant) a mix it
            # reads again; never an empty file once the first record is written.
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))

    def release(self) -> None:
        while self._fds:
            os.close(self._fds.pop())  # closing drops the flock

    def __enter__(self) -> WorkflowLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> dict[str, object]:
    """The holder's record; read again for a moment while the holder has not written it yet (it writes
    right after taking the lock)."""
    for _ in range(40):
        try:
            value = json.loads(os.pread(fd, 4096, 0))
            if isinstance(value, dict):
                return value
        except (OSError, ValueError):
            pass
        time.sleep(0.005)
    return {}


def ensure_state_dir(state_dir: Path) -> None:
    """Create the state directory and its folders (0700)."""
    for folder in (state_dir, state_dir / "runs", state_dir / LOCKS):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)


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

    def lock(self, *, wait: float = 0.0) -> RunLock:
        lock = RunLock(self.path / LOCK)
        lock.acquire(wait=wait)
        return lock

    @property
    def state_dir(self) -> Path:
        return self.path.parent.parent

    def workflow(self) -> str | None:
        """The absolute path of the workflow the run's ``run_started`` record names (None when it cannot be
        read)."""
        first, _damage = self.head()
        if first is None or not isinstance(first.event, RunStarted):
            return None
        return first.event.workflow

    def head(self) -> tuple[Entry | None, JournalCorrupt | None]:
        """The run's first record (``run_started``), or why it cannot be read; (None, None) when the journal
        has no complete line (its process died writing the first one: nothing ran)."""
        try:
            return first_record(self.journal), None
        except JournalCorrupt as exc:
            return None, exc
        except OSError as exc:
            return None, JournalCorrupt(f"cannot be read: {exc.strerror or exc}", file=str(self.journal))

    def damage(self) -> JournalCorrupt | None:
        """Why the run's first record cannot be read (None when it can, or when there is none yet)."""
        return self.head()[1]

    def closed_status(self) -> str | None:
        """``succeeded`` or ``failed`` when the run is closed (its last record is ``run_finished`` with a
        closed status), else None: the run is open."""
        last = last_record(self.journal)
        if last is not None and closes(last):
            return str(getattr(last.event, "status", ""))
        return None

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

    def read(self, *, keep_results: set[str] | None = None, unmask: Masker | None = None) -> RunState:
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


def iter_run_dirs(state_dir: Path) -> Iterator[RunDir]:
    runs = state_dir / "runs"
    if not runs.is_dir():
        return
    for path in sorted(runs.iterdir()):
        if (path / JOURNAL).is_file():
            yield RunDir(path)


def runs_of(state_dir: Path, workflow: Path | WorkflowIdentity) -> list[RunDir]:
    """The runs of this workflow (:meth:`WorkflowIdentity.owns`), oldest first; reads only the first line
    of each journal. A run whose first record cannot be read is counted in when that line may name this
    workflow, or names none: it may be one of its runs (:meth:`RunDir.damage` says why it cannot be read)."""
    identity = identify(workflow)
    out = []
    for run_dir in iter_run_dirs(state_dir):
        first, damage = run_dir.head()
        if first is not None:
            if isinstance(first.event, RunStarted) and identity.owns(first.event):
                out.append(run_dir)
        elif damage is not None and identity.may_own(workflow_named(run_dir.journal)):
            out.append(run_dir)
    return out


def unfinished_runs(state_dir: Path, workflow: Path | WorkflowIdentity) -> list[RunDir]:
    """Open runs of this workflow, oldest first. Reads only the ends of each journal: a run is closed when its
    last complete event is ``run_finished`` with a closed status (see :mod:`runner.engine.journal.reader`)."""
    return [run_dir for run_dir in runs_of(state_dir, workflow) if run_dir.closed_status() is None]


class UnknownRun(UsageError):
    """No run matches a run id (or its abbreviation)."""


class AmbiguousRun(UsageError):
    """A run id abbreviation that matches more than one run."""

    def __init__(self, message: str, candidates: list[str]) -> None:
        super().__init__(message)
        self.candidates = candidates


def find_run(state_dir: Path, ref: str, *, workflow: Path | WorkflowIdentity | None = None) -> RunDir:
    """The run ``ref`` names: its full id, or a unique prefix (``20261129T2135``) or suffix (the random part,
    ``3f9a1c``) of one. With ``workflow``, only that workflow's runs are candidates. Raises
    :class:`UnknownRun` naming recent runs when nothing matches, and :class:`AmbiguousRun` listing the
    candidates when several do."""
    candidates = runs_of(state_dir, workflow) if workflow is not None else list(iter_run_dirs(state_dir))
    exact = next((r for r in candidates if r.run_id == ref), None)
    if exact is not None:
        return exact
    matches = _abbreviated(candidates, ref)
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise _ambiguous(ref, matches, f"{_of(workflow)} in {state_dir}")
    known = [r.run_id for r in candidates]
    hint = f"; known runs: {', '.join(known[-5:])}" if known else ""
    raise UnknownRun(f"no run {ref!r}{_of(workflow)} in {state_dir}{hint}")


def _ambiguous(ref: str, matches: list[RunDir], where: str) -> AmbiguousRun:
    """``ref`` abbreviates every run of ``matches`` (runs ``where``): the newest 20 listed, all as candidates."""
    listed = "\n  ".join(r.run_id for r in matches[-20:])
    more = f"\n  ... and {len(matches) - 20} more" if len(matches) > 20 else ""
    return AmbiguousRun(
        f"{ref!r} matches {len(matches)} runs{where}; say which:\n  {listed}{more}", [r.run_id for r in matches]
    )


def _abbreviated(candidates: list[RunDir], ref: str) -> list[RunDir]:
    """The runs whose id ``ref`` begins or ends (an empty ``ref`` abbreviates none)."""
    if not ref:
        return []
    return [r for r in candidates if r.run_id.startswith(ref) or r.run_id.endswith(ref)]


def _of(workflow: Path | WorkflowIdentity | None) -> str:
    """`` of WORKFLOW`` in a message about runs looked for among one workflow's; empty when among all."""
    if workflow is None:
        return ""
    return f" of {workflow.path if isinstance(workflow, WorkflowIdentity) else workflow}"
