"""How a stdio server is started: its program found, its working directory checked, its environment chosen.

The rules (docs/servers.md says the same):

- **Working directory.** A relative ``cwd`` is relative to ``base``: the workflow file's folder (the current
  directory for ``mcp-run tools``/``call``, which have no workflow). Without ``cwd`` the server runs in
  ``base`` itself. It must be an existing directory.
- **Program** (``command[0]``; the rest of the argv is passed as it is):

  * an absolute path is used as it is;
  * a path with a ``/`` in it (``./server.sh``, ``bin/tool``, ``../x``) is relative to ``base``, never to the
    caller's current directory, so a workflow starts its servers the same from anywhere;
  * a bare name (``node``, ``npx``, ``uvx``) is looked up on ``PATH`` (the PATH the server gets: its ``env``
    may set one), then in the folder of the Python running mcp-run (``sys.executable``'s: a virtualenv's
    ``bin``, where console scripts such as ``mcp-run-demo`` live even when that folder is not on PATH).
    PATH comes first, so the fallback never changes a command that works; it only finds one that would not.
    ``python`` is not special: it is the ``python`` of PATH when there is one (the user's, with the user's
    packages), and the virtualenv's only when PATH has none (Debian and Ubuntu have no ``python``).

  The program must be a file the user may execute. The transport then gets an absolute argv[0] and an
  absolute working directory (:class:`Launch`), and knows nothing of workflows.
- **Environment.** A server gets the allow-list of :mod:`runner.transports.stdio` (HOME, PATH, ...), the
  variables its ``env_passthrough`` patterns name (:func:`passed_through`; ``*`` matches any characters, so
  ``npm_config_*``), and its ``env``, which wins. A listed variable that is not set is simply absent.

A server that cannot start as described raises :class:`LaunchError` (a ``ConnectFailed``: exit 4, never
retried) before anything is spawned, saying which path it resolved to.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Final, Literal

from runner.errors import ConnectFailed

if TYPE_CHECKING:
    from runner.workflow.plan import Plan
    from runner.workflow.positions import Loc
    from runner.workflow.servers import StdioServer

__all__ = [
    "INTERPRETER_DIR",
    "Found",
    "Launch",
    "LaunchError",
    "launch_loc",
    "passed_through",
    "resolve_launch",
    "server_launch",
    "stdio_environment",
    "stdio_server",
    "workflow_folder",
]

INTERPRETER_DIR: Final = os.path.dirname(sys.executable) if sys.executable else None
"""The folder of the Python running mcp-run (not resolved: a virtualenv's ``bin``, not the base Python's)."""


class Found(Enum):
    """How the program was found."""

    ABSOLUTE = "absolute path"
    RELATIVE = "relative to the workflow's folder"
    PATH = "on PATH"
    BESIDE_PYTHON = "beside mcp-run's Python (not on PATH)"


@dataclass(frozen=True)
class Launch:
    """A stdio server ready to spawn: ``argv[0]`` and ``cwd`` are absolute."""

    argv: tuple[str, ...]
    cwd: str
    found: Found


class LaunchError(ConnectFailed):
    """A stdio server that cannot start as described.

    ``part`` is what is wrong (``command`` or ``cwd``), ``resolved`` the absolute path it came to (None for a
    name found nowhere), ``missing`` True when nothing is there (rather than something unusable),
    ``relative`` True when the path was relative to the workflow's folder (it travels with the workflow, so
    ``validate`` calls it an error; a name on PATH or an absolute path depends on the machine). ``detail``
    reads ``command ./server.sh not found: /srv/flows/server.sh``.
    """

    def __init__(
        self,
        detail: str,
        *,
        part: Literal["command", "cwd"],
        resolved: str | None,
        relative: bool,
        missing: bool = True,
        server: str | None = None,
        where: str | None = None,
    ) -> None:
        who = f"server {server}" if server is not None else "the server"
        super().__init__(f"cannot start {who}: {detail}" + (f" ({where})" if where else ""))
        self.detail = detail
        self.part = part
        self.resolved = resolved
        self.relative = relative
        self.missing = missing
        self.server = server
        self.where = where

    def located(self, server: str, where: str | None) -> LaunchError:
        """The same error naming its server and where the workflow describes it (``file:line:column``)."""
        return LaunchError(
            self.detail,
            part=self.part,
            resolved=self.resolved,
            relative=self.relative,
            missing=self.missing,
            server=server,
            where=where,
        )


def resolve_launch(
    command: Sequence[str],
    *,
    base: str,
    cwd: str | None = None,
    path: str | None = None,
    beside: str | None = INTERPRETER_DIR,
) -> Launch:
    """``command`` and ``cwd`` resolved by the module's rules; :class:`LaunchError` when they cannot work.

    ``base`` is the absolute folder relative paths start from; ``path`` the PATH the server gets (None:
    mcp-run's own); ``beside`` the folder searched after PATH.
    """
    if not command:
        raise ValueError("command must not be empty")
    base = os.path.abspath(base)
    workdir = _resolve_cwd(base, cwd)
    program = command[0]
    if not program:
        raise LaunchError("the command's program is an empty string", part="command", resolved=None, relative=False)
    if os.path.isabs(program):
        found, resolved = Found.ABSOLUTE, os.path.normpath(program)
    elif "/" in program:
        found, resolved = Found.RELATIVE, os.path.normpath(os.path.join(base, program))
    else:
        return _look_up(program, command, workdir, os.environ.get("PATH", os.defpath) if path is None else path, beside)
    problem = _not_executable(resolved)
    if problem is not None:
        detail = f"command {program} {problem}" + (f": {resolved}" if program != resolved else "")
        if problem == "is not executable":
            detail += f" (make it executable: chmod +x {resolved})"
        raise LaunchError(
            detail, part="command", resolved=resolved, relative=found is Found.RELATIVE, missing=problem == "not found"
        )
    return Launch((resolved, *command[1:]), workdir, found)


def passed_through(patterns: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of ``environ`` (default: mcp-run's) that ``patterns`` name; ``*`` matches any characters.

    Names are case-sensitive; variables that are not set are absent, as are exported shell functions
    (values starting with ``()``), which the allow-list skips too.
    """
    source = os.environ if environ is None else environ
    found: dict[str, str] = {}
    for pattern in patterns:
        found.update(_named(source, pattern))
    return {name: value for name, value in sorted(found.items()) if not value.startswith("()")}


def _named(source: Mapping[str, str], pattern: str) -> dict[str, str]:
    if "*" in pattern:
        return {name: value for name, value in source.items() if fnmatchcase(name, pattern)}
    return {pattern: source[pattern]} if pattern in source else {}


def _resolve_cwd(base: str, cwd: str | None) -> str:
    if cwd is None:
        workdir, relative = base, True
    else:
        workdir = os.path.normpath(os.path.join(base, cwd))  # an absolute cwd replaces base
        relative = not os.path.isabs(cwd)
    problem = None if os.path.isdir(workdir) else "is not a directory" if os.path.exists(workdir) else "does not exist"
    if problem is not None:
        raise LaunchError(
            f"working directory {workdir} {problem}",
            part="cwd",
            resolved=workdir,
            relative=relative,
            missing=problem == "does not exist",
        )
    return workdir


def _look_up(program: str, command: Sequence[str], workdir: str, path: str, beside: str | None) -> Launch:
    """A bare name: the first executable file called ``program`` on ``path``, else in ``beside``."""
    for entry in path.split(os.pathsep):
        folder = os.path.join(workdir, entry) if entry else workdir  # as execvp reads them: from the cwd
        candidate = os.path.normpath(os.path.join(folder, program))
        if _not_executable(candidate) is None:
            return Launch((candidate, *command[1:]), workdir, Found.PATH)
    if beside:
        candidate = os.path.join(beside, program)
        if _not_executable(candidate) is None:
            return Launch((candidate, *command[1:]), workdir, Found.BESIDE_PYTHON)
    detail = f"command {program} not found on PATH" + (f" nor in {beside} (beside mcp-run's Python)" if beside else "")
    if program == "python":
        detail += "; some systems (Debian, Ubuntu) have no `python`: write python3, or the interpreter's full path"
    raise LaunchError(detail, part="command", resolved=None, relative=False)


def _not_executable(path: str) -> str | None:
    """None when ``path`` is a file this process may execute, else what is wrong with it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "not found"
    except NotADirectoryError:
        return "not found"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "is a directory"
    if not os.access(path, os.X_OK):
        return "is not executable"
    return None


# ---------------------------------------------------------------------------------------------------
# A workflow's stdio servers


def workflow_folder(plan: Plan) -> str:
    """Where a workflow's relative paths start: its file's folder (the current directory for a workflow that
    was not read from a file, such as ``parse_workflow(text)``'s)."""
    if plan.file is None or not os.path.isfile(plan.file):
        return os.getcwd()
    return os.path.dirname(os.path.realpath(plan.file))


def stdio_server(plan: Plan, name: str) -> StdioServer:
    """Server ``name`` of ``plan``, a stdio server (``ValueError`` for an HTTP one: a caller's mistake)."""
    from runner.workflow.servers import StdioServer

    connection = plan.servers[name].connection
    if not isinstance(connection, StdioServer):
        raise ValueError(f"server {name!r} is not a stdio server")
    return connection


def stdio_environment(plan: Plan, name: str, inputs: Mapping[str, Any], env: Mapping[str, Any]) -> dict[str, str]:
    """What stdio server ``name`` gets besides the allow-list: the variables its ``env_passthrough`` names, then
    its ``env`` rendered (which wins)."""
    from runner.workflow.context import make_context

    server = stdio_server(plan, name)
    rendered = server.env.render(make_context(inputs=inputs, env=env, steps={})) if server.env is not None else {}
    return passed_through(server.env_passthrough) | {
        k: "" if v is None else str(v) for k, v in (rendered or {}).items()
    }


def server_launch(plan: Plan, name: str, path: str | None = None) -> Launch:
    """Stdio server ``name``'s program and working directory, resolved; ``path`` is the PATH it gets (None:
    mcp-run's own). Raises :class:`LaunchError` located at the workflow's line."""
    server = stdio_server(plan, name)
    try:
        return resolve_launch(server.command, base=workflow_folder(plan), cwd=server.cwd, path=path)
    except LaunchError as exc:
        raise exc.located(name, _where(plan, launch_loc(plan, name, exc))) from None


def launch_loc(plan: Plan, name: str, error: LaunchError) -> Loc:
    """Where in the workflow the part of server ``name`` that ``error`` is about sits."""
    if error.part == "command":
        return ("servers", name, "command", 0)
    return ("servers", name, "cwd") if stdio_server(plan, name).cwd is not None else ("servers", name)


def _where(plan: Plan, loc: Loc) -> str | None:
    if plan.file is None:
        return None
    line, column = plan.positions.locate(loc) if plan.positions is not None else (None, None)
    return plan.file + (f":{line}" if line is not None else "") + (f":{column}" if column is not None else "")
