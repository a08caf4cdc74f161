"""Where runs are, as the command line names them, and the commands mcp-run prints for the user to paste.

One rule finds the state directory (:func:`runner.engine.journal.rundir.resolve_state_dir`): ``--state-dir``, else
``$MCP_RUN_STATE_DIR``, else ``.mcp-run`` beside the workflow when the command names one, else
``./.mcp-run``. ``resume``, ``show`` and ``logs`` take ``[WORKFLOW] [RUN_ID]``: a first argument that is an
existing file (or reads as a path: ``.yaml``, ``.yml``, ``.json``, a ``/``) is the workflow, anything else
a run id, full or abbreviated.

Every command printed as advice (``mcp-run resume ...``, ``mcp-run runs ...``) must work when pasted into
the same shell in the same directory: the workflow is named relative to the current directory when that is
shorter, and ``--state-dir`` is added whenever the rule would not find the run without it. The hints of both
engines are made here: a Temporal run has no state directory (``state_dir=None``: no ``--state-dir``), and
its hints carry ``--engine temporal`` and the inputs given as extra arguments (:func:`inputs_args`).
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from runner.errors import UsageError

if TYPE_CHECKING:
    from runner.engine.core.resume import InDoubt
    from runner.engine.journal.rundir import RunDir

__all__ = [
    "find_named_run",
    "inputs_args",
    "parse_target",
    "resume_hint",
    "run_hint",
    "runs_hint",
    "short",
    "show_hint",
    "state_dir_args",
]

_WORKFLOW_SUFFIXES = (".yaml", ".yml", ".json")


DECISIONS: Final = (
    ("--rerun-in-doubt", "call them again"),
    ("--skip-in-doubt", "never call them: count them as failed"),
    ("--accept-in-doubt", "they happened: count them as done"),
)
"""The decisions about items in doubt, as every hint offers them: the flag, and what it does."""


def in_doubt_decision(args: argparse.Namespace) -> InDoubt:
    """The decision about items in doubt the command line gives (``ask`` when none): at most one of
    :data:`DECISIONS`' flags (``--rerun-in-doubt`` is ``rerun``)."""
    given = [flag for flag, _words in DECISIONS if getattr(args, flag[2:].replace("-", "_"), False)]
    if len(given) > 1:
        raise UsageError(f"{given[0]} and {given[1]} contradict each other: give one decision")
    return given[0][2:].removesuffix("-in-doubt") if given else "ask"  # type: ignore[return-value]  # an InDoubt


def decision_lines(command: Callable[[str], str], indent: str = "  ") -> list[str]:
    """One line per decision: ``command(flag)`` (the resume command with that flag), aligned, and its words."""
    commands = [(command(flag), words) for flag, words in DECISIONS]
    width = max(len(text) for text, _words in commands)
    return [f"{indent}{text.ljust(width)}    # {words}" for text, words in commands]


def parse_target(first: str | None, second: str | None) -> tuple[Path | None, str | None]:
    """``[WORKFLOW] [RUN_ID]`` from one or two positional arguments: (workflow, run id)."""
    if second is not None:
        return _workflow(str(first)), second
    if first is None:
        return None, None
    if Path(first).is_file() or first.endswith(_WORKFLOW_SUFFIXES) or "/" in first or os.sep in first:
        return _workflow(first), None
    return None, first


def find_named_run(state_dir: Path, ref: str, workflow: Path | None) -> RunDir:
    """:func:`runner.engine.journal.rundir.find_run`, with a hint when a run id alone found nothing (runs are kept
    beside their workflow, which a run id does not name)."""
    from runner.engine.journal.rundir import UnknownRun, find_run

    try:
        return find_run(state_dir, ref, workflow=workflow)
    except UnknownRun as exc:
        if workflow is not None or os.environ.get("MCP_RUN_STATE_DIR"):
            raise
        raise UnknownRun(f"{exc}\n(runs are kept beside their workflow: name it, as in WORKFLOW {ref})") from None


def _workflow(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise UsageError(f"no workflow file {text!r}")
    return path


def short(path: Path | str) -> str:
    """``path`` relative to the current directory when that is shorter, else absolute."""
    absolute = os.path.abspath(path)
    try:
        relative = os.path.relpath(absolute)
    except ValueError:
        return absolute
    return relative if len(relative) < len(absolute) else absolute


def state_dir_args(state_dir: Path | None, workflow: Path | None) -> list[str]:
    """``["--state-dir", DIR]`` when the default rule (for a command naming ``workflow``, or none) would not
    find ``state_dir`` from here, else nothing (nothing either for a run kept in no state directory: None)."""
    from runner.engine.journal.rundir import resolve_state_dir

    if state_dir is None or resolve_state_dir(None, workflow).resolve() == state_dir.resolve():
        return []
    return ["--state-dir", short(state_dir)]


def inputs_args(input_pairs: Sequence[str], inputs_file: str | None) -> list[str]:
    """The inputs of a command line as given (``--input NAME=VALUE``..., ``--inputs-file FILE``), for a hint
    that must give them again: a resume on Temporal compares them with the run's (nothing is journaled here)."""
    given = [part for pair in input_pairs for part in ("--input", pair)]
    return given + (["--inputs-file", inputs_file] if inputs_file else [])


def _command(*parts: str) -> str:
    return "mcp-run " + shlex.join(parts)


def _existing(workflow: Path | str | None) -> Path | None:
    return Path(workflow) if workflow is not None and Path(workflow).is_file() else None


def resume_hint(state_dir: Path | None, run_id: str, workflow: Path | str | None, *extra: str) -> str:
    """``mcp-run resume WORKFLOW RUN_ID [--state-dir DIR] EXTRA...`` (the run-id form when the workflow file
    is gone)."""
    path = _existing(workflow)
    if path is not None:
        return _command("resume", short(path), run_id, *state_dir_args(state_dir, path), *extra)
    return _command("resume", run_id, *state_dir_args(state_dir, None), *extra)


def show_hint(
    state_dir: Path | None, run_id: str, workflow: Path | str | None, *extra: str, command: str = "show"
) -> str:
    """``mcp-run show WORKFLOW RUN_ID [--state-dir DIR] EXTRA...`` (or ``logs``, or ``cancel`` with no
    workflow: any command that takes a run)."""
    path = _existing(workflow)
    if path is not None:
        return _command(command, short(path), run_id, *state_dir_args(state_dir, path), *extra)
    return _command(command, run_id, *state_dir_args(state_dir, None), *extra)


def runs_hint(state_dir: Path | None, workflow: Path | str | None) -> str:
    """``mcp-run runs WORKFLOW [--state-dir DIR]``."""
    path = _existing(workflow)
    if path is not None:
        return _command("runs", short(path), *state_dir_args(state_dir, path))
    return _command("runs", *state_dir_args(state_dir, None))


def run_hint(state_dir: Path | None, workflow: Path, *flags: str) -> str:
    """``mcp-run WORKFLOW FLAGS... [--state-dir DIR]``."""
    from runner.cli import COMMANDS

    name = short(workflow)
    if name.startswith("-") or name in COMMANDS:
        name = os.path.join(os.curdir, name)  # not read as an option or a command name
    return _command(name, *flags, *state_dir_args(state_dir, workflow))
