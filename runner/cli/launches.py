"""What ``validate`` and ``plan`` say about stdio servers: where each starts, in which folder, with which of
mcp-run's variables; and what keeps one from starting (see :mod:`runner.launch` for the rules).

A path relative to the workflow's folder that does not work (``./server.sh`` missing or not executable, a
``cwd`` that does not exist) is an error of the workflow: it travels with the file. A name looked up on PATH,
or an absolute path, depends on the machine the run starts on: when it does not work here it is a warning
(``validate``) or a note (``plan``), and a run that needs it fails to start that server (exit 4).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from runner.errors import WorkflowError
from runner.launch import Found, Launch, LaunchError, passed_through
from runner.workflow.plan import Plan
from runner.workflow.positions import format_path
from runner.workflow.servers import StdioServer
from runner.workflow.template import TemplateError

__all__ = ["ServerLaunch", "check_launches", "launch_lines"]

_FOUND_NOTE = {
    Found.ABSOLUTE: None,
    Found.RELATIVE: "relative to the workflow's folder",
    Found.PATH: "found on PATH",
    Found.BESIDE_PYTHON: "found beside mcp-run's Python, not on PATH",
}


@dataclass
class ServerLaunch:
    """One stdio server as it would start now: its launch or why it cannot, and its passed-through names."""

    launch: Launch | None
    problem: LaunchError | None
    passthrough: dict[str, list[str]] = field(default_factory=dict)  # pattern -> names set now


def check_launches(plan: Plan) -> tuple[dict[str, ServerLaunch], list[WorkflowError], list[WorkflowError]]:
    """Every stdio server's :class:`ServerLaunch`, then the errors (paths relative to the workflow) and the
    warnings (names on PATH, absolute paths), each located in the file."""
    from runner.engine.runctl import env_context
    from runner.launch import server_launch, stdio_environment

    servers: dict[str, ServerLaunch] = {}
    errors: list[WorkflowError] = []
    warnings: list[WorkflowError] = []
    for name, planned in plan.servers.items():
        if not isinstance(planned.connection, StdioServer):
            continue
        passthrough = {pattern: sorted(passed_through([pattern])) for pattern in planned.connection.env_passthrough}
        try:  # the PATH the server would get, when its env sets one (inputs not given render as null here)
            path = stdio_environment(plan, name, plan.input_values or {}, env_context(plan)).get("PATH")
        except TemplateError:
            path = None
        try:
            servers[name] = ServerLaunch(server_launch(plan, name, path), None, passthrough)
        except LaunchError as exc:
            servers[name] = ServerLaunch(None, exc, passthrough)
            error = _located(plan, name, exc)
            (errors if exc.relative else warnings).append(error)
    return servers, errors, warnings


def launch_lines(servers: dict[str, ServerLaunch]) -> dict[str, list[str]]:
    """The lines ``plan`` prints under each stdio server."""
    out: dict[str, list[str]] = {}
    for name, entry in servers.items():
        lines: list[str] = []
        if entry.launch is not None:
            note = _FOUND_NOTE[entry.launch.found]
            lines.append(f"runs {shlex.join(entry.launch.argv)}" + (f" ({note})" if note else ""))
            lines.append(f"in {entry.launch.cwd}")
        elif entry.problem is not None:
            lines.append(f"cannot start here: {entry.problem.detail}")
        if entry.passthrough:
            shown = []
            for pattern, names in entry.passthrough.items():
                if "*" in pattern:
                    shown.append(f"{pattern} ({', '.join(names) if names else 'none set'})")
                else:
                    shown.append(pattern if names else f"{pattern} (not set)")
            lines.append("passes through " + ", ".join(shown))
        out[name] = lines
    return out


def _located(plan: Plan, name: str, exc: LaunchError) -> WorkflowError:
    from runner.launch import launch_loc, workflow_folder

    loc = launch_loc(plan, name, exc)
    hint = None
    if exc.relative and exc.missing:
        what = "a program path with a /" if exc.part == "command" else "cwd"
        hint = f"{what} is relative to the workflow's folder, {workflow_folder(plan)}"
    elif not exc.relative:
        hint = f"this depends on the machine: a run here cannot start server {name}"
    if plan.positions is not None:
        return plan.positions.error(exc.detail, loc, suggestion=hint)
    return WorkflowError(exc.detail, path=format_path(loc), suggestion=hint)
