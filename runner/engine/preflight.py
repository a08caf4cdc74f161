"""What a run checks before its first call: that the state directory can keep runs and ``--output`` can take
the outputs.

A run that made its calls and then cannot journal them, or cannot write its outputs, has already acted; the
same run refused at the start has done nothing. So whatever can be known at the start is checked there, and
each refusal says what was wrong, what was expected, and what to do (exit 2, like every usage error)::

    UsageError
    ├── StateDirUnusable     the state directory is no directory, cannot be written, or is full
    └── OutputUnusable       --output is a directory, the workflow (or inputs) file itself, or cannot be written

What cannot be known at the start (a disk that fills up during the run) is still reported cleanly at the end:
the journal's own errors (:class:`~runner.engine.journal.writer.JournalWriteError`), and the CLI keeps the outputs
on stdout and in the journal when ``--output`` cannot be written after all. ``--inputs-file`` is read (a
regular file only) before the workflow lock is taken: see :func:`runner.workflow.loader.load_inputs_file`.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Final

from runner.engine.journal.rundir import ensure_state_dir
from runner.errors import UsageError
from runner.workflow.yamlnodes import file_kind

__all__ = [
    "PROBE_BYTES",
    "OutputUnusable",
    "StateDirUnusable",
    "check_output",
    "check_state_dir",
    "state_dir_named_by",
]

PROBE_BYTES: Final = 8 * 1024
"""What the state directory must take at the start: room for a run's first records, a few KiB (a file this
size is written there and removed), so that a full disk refuses the run instead of failing its first journal
write."""


class StateDirUnusable(UsageError):
    """The state directory cannot keep runs: it is no directory, it cannot be written, or its disk is full.
    Nothing was called. ``state_dir``: the directory; ``reason``: why, in a few words."""

    def __init__(self, state_dir: Path, reason: str, *, named_by: str = "--state-dir") -> None:
        self.state_dir = state_dir
        self.reason = reason
        advice = "free some space, or choose" if reason.endswith(os.strerror(errno.ENOSPC)) else "choose"
        which = "" if named_by == "--state-dir" else f" (it is {named_by})"
        super().__init__(
            f"cannot keep runs in {state_dir}{which}: {reason}; nothing was called. "
            f"{advice.capitalize()} another directory with --state-dir DIR"
        )

    @classmethod
    def from_os_error(cls, state_dir: Path, exc: OSError, *, named_by: str = "--state-dir") -> StateDirUnusable:
        """The refusal for ``exc``, raised while making or writing in ``state_dir``: its reason, and the file
        it concerns when that is not the state directory itself (``ro/runs: Read-only file system``)."""
        return cls(state_dir, _why(exc, state_dir), named_by=named_by)


class OutputUnusable(UsageError):
    """``--output`` names what cannot take the outputs. Nothing was called."""

    def __init__(self, output: Path, reason: str, *, suggestion: str = "Choose another file") -> None:
        self.output = output
        self.reason = reason
        super().__init__(f"--output {output}: {reason}; nothing was called. {suggestion}")


def _why(exc: OSError, around: Path) -> str:
    """``ro/runs: Read-only file system``: the OS's reason, with the file it concerns when that is not ``around``."""
    reason = exc.strerror or str(exc)
    if isinstance(exc.filename, (str, bytes)) and Path(os.fsdecode(exc.filename)) != around:
        return f"{os.fsdecode(exc.filename)}: {reason}"
    return reason


def state_dir_named_by(flag: str | None) -> str:
    """What chose the state directory (see :func:`runner.engine.journal.rundir.resolve_state_dir`), for the advice."""
    if flag:
        return "--state-dir"
    if os.environ.get("MCP_RUN_STATE_DIR"):
        return "$MCP_RUN_STATE_DIR"
    return "the default, .mcp-run beside the workflow"


def check_state_dir(state_dir: Path, *, named_by: str = "--state-dir") -> None:
    """Make the state directory and its folders (0700), and check that it takes :data:`PROBE_BYTES`; raise
    :class:`StateDirUnusable` when it is no directory (a file, ``/dev/null``), is read-only or is full."""
    try:
        mode = os.stat(state_dir).st_mode
    except FileNotFoundError:
        pass  # made below
    except OSError as exc:
        raise StateDirUnusable.from_os_error(state_dir, exc, named_by=named_by) from None
    else:
        if not stat.S_ISDIR(mode):
            raise StateDirUnusable(state_dir, f"it is {file_kind(mode)}, not a directory", named_by=named_by)
    try:
        ensure_state_dir(state_dir)
    except OSError as exc:
        raise StateDirUnusable.from_os_error(state_dir, exc, named_by=named_by) from None
    try:
        fd, probe = tempfile.mkstemp(dir=state_dir, prefix=".write-check-")
        try:
            block = memoryview(bytes(PROBE_BYTES))
            while block:
                block = block[os.write(fd, block) :]
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:  # the probe's name says nothing: the reason alone
        raise StateDirUnusable(state_dir, exc.strerror or str(exc), named_by=named_by) from None


def _same_file(a: os.stat_result, b: Path) -> bool:
    """Whether ``b`` is the file ``a`` describes: by device and inode, so another name (a hard link, a
    symbolic link, a bind mount, ``../x/wf.yaml``) is the same file."""
    try:
        other = os.stat(b)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (other.st_dev, other.st_ino)


def _disk_full(folder: Path) -> bool:
    """Whether the file system of ``folder`` has no block left for this process (root may use the reserve)."""
    try:
        info = os.statvfs(folder)
    except OSError:
        return False  # nothing known: the write at the end says
    return (info.f_bfree if os.geteuid() == 0 else info.f_bavail) == 0 and info.f_blocks > 0


def check_output(output: Path, *, workflow: Path, inputs_file: str | None = None) -> None:
    """Check, before the first call, that ``output`` (``--output``) can take the outputs: a file that is
    not the workflow or inputs file (whatever name it is given by), in a folder that exists and can be
    written, or a device that takes writes (``/dev/full`` does not). Raise :class:`OutputUnusable`."""
    info = _stat(output)
    if info is None:
        _check_new_file(output)
        return
    if stat.S_ISDIR(info.st_mode):
        raise OutputUnusable(
            output,
            "it is a directory; expected a file to write the outputs to",
            suggestion=f"Name a file, for instance --output {output / 'outputs.json'}",
        )
    guarded = [("the workflow file", workflow)] + ([("the inputs file", Path(inputs_file))] if inputs_file else [])
    for role, path in guarded:
        if _same_file(info, path):
            also = "" if os.path.abspath(output) == os.path.abspath(path) else f" ({path}) under another name"
            raise OutputUnusable(output, f"it is {role}{also}: writing the outputs there would overwrite it")
    if not (stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode)):  # those opened at the end only
        _check_writable(output, info)


def _stat(output: Path) -> os.stat_result | None:
    """The output's file, None when there is none yet; ``OutputUnusable`` when it cannot be looked at."""
    try:
        return os.stat(output)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise OutputUnusable(output, f"{Path(os.path.abspath(output)).parent} is not a directory") from None
    except OSError as exc:
        raise OutputUnusable(output, _why(exc, output)) from None


def _check_new_file(output: Path) -> None:
    """An output that does not exist yet: its folder must exist, take a new file, and have room for it."""
    folder = Path(os.path.abspath(output)).parent
    if not folder.is_dir():
        raise OutputUnusable(output, f"there is no folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputUnusable(output, f"cannot create a file in {folder} (not writable)")
    if _disk_full(folder):
        raise OutputUnusable(output, f"the disk of {folder} is full")


def _check_writable(output: Path, info: os.stat_result) -> None:
    """An existing file or device opens for writing (neither created nor truncated); a device must also take
    a write of nothing (``/dev/full`` refuses every write). A FIFO's or a socket's reader may start later:
    those are not opened here."""
    try:
        fd = os.open(output, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            if stat.S_ISCHR(info.st_mode):
                os.write(fd, b"")
        finally:
            os.close(fd)
    except OSError as exc:
        refuses = "it refuses writes: " if stat.S_ISCHR(info.st_mode) else ""
        raise OutputUnusable(output, refuses + _why(exc, output)) from None
