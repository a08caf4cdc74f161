"""One server model: a workflow's server, checked and resolved once into what every user of it reads.

A server as written (:class:`~runner.workflow.model.Server`) has every field optional, so its rules (``command``
xor ``url``, ``env`` only with a command, the defaults of ``connect_timeout`` and ``reconnect``) would otherwise
be re-decided by each reader: the plan, the connector, the scheduler, the Temporal activity. Here they are
decided once: :func:`server_shape_problems` lists what is wrong with one as written, and
:func:`planned_server` turns a valid one into a :class:`PlannedServer` whose ``connection`` is a
:class:`StdioServer` or an :class:`HttpServer` (a union the type checker makes each reader match on), with its
limits resolved (``connect_timeout`` stays None when the workflow sets none: the run's ``--connect-timeout``
applies, see :meth:`PlannedServer.connect_within`).

Pure: no I/O, nothing rendered here but what a caller asks for (:func:`check_headers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from runner.errors import WorkflowError
from runner.protocol.versions import ProtocolChoice
from runner.workflow.auth import ServerAuth, auth_problems
from runner.workflow.context import make_context
from runner.workflow.literals import Problem, ascii_hint, header_value_problem, server_problems
from runner.workflow.model import Server
from runner.workflow.positions import Loc
from runner.workflow.template import Compiled

if TYPE_CHECKING:
    from runner.workflow.plan import Plan

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_RECONNECT",
    "HttpServer",
    "PlannedServer",
    "StdioServer",
    "check_headers",
    "planned_server",
    "rendered_headers",
    "server_shape_problems",
]

# A call with no progress for this long ends in doubt (cancellation sent). Five times the 60 s the TypeScript
# SDK waits by default: long enough for a slow tool, short enough that a hung server cannot hold a batch
# forever. `idle_timeout: none` opts out; progress notifications reset it.
DEFAULT_IDLE_TIMEOUT: float = 300.0
# Starting or reaching a server, its handshake, and each page of its tool list.
DEFAULT_CONNECT_TIMEOUT: float = 30.0
# How long a run keeps reconnecting to a server that went away mid-run before it gives the items left up.
DEFAULT_RECONNECT: float = 300.0

# (field, whether it belongs to stdio servers): a field of the other kind is an error at its key
_KIND_FIELDS: Final = (
    ("env", True),
    ("env_passthrough", True),
    ("cwd", True),
    ("headers", False),
    ("transport", False),
    ("auth", False),
)


@dataclass(frozen=True, slots=True)
class StdioServer:
    """A server mcp-run starts: its argv (no templates), working directory as written (relative to the workflow's
    folder, see :mod:`runner.launch`), ``env`` compiled (over inputs and env) and the ``env_passthrough``
    patterns."""

    command: tuple[str, ...]
    cwd: str | None
    env: Compiled | None
    env_passthrough: tuple[str, ...]
    kind: Literal["stdio"] = "stdio"


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A server mcp-run reaches: its URL and headers compiled (over inputs and env), its OAuth, its transport."""

    url: Compiled
    headers: Compiled | None
    auth: ServerAuth | None
    transport: Literal["auto", "streamable-http", "sse"]
    kind: Literal["http"] = "http"


@dataclass(frozen=True, slots=True)
class PlannedServer:
    """A server resolved once: how to reach it (``connection``) and its limits. ``server`` is the server as
    written (a fingerprint hashes that, and the plan's text shows it). ``connect_timeout`` is None when the
    workflow sets none (the run's default applies: :meth:`connect_within`); ``reconnect`` is resolved (0:
    never reconnect); ``tasks``: whether calls may become tasks (``tasks: auto``)."""

    name: str
    server: Server
    connection: StdioServer | HttpServer
    connect_timeout: float | None
    reconnect: float
    max_concurrency: int
    rate: float | None
    protocol: ProtocolChoice
    trust_annotations: bool
    tasks: bool

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """Which kind of server: ``stdio`` or ``http``."""
        return self.connection.kind

    def connect_within(self, run_default: float | None = None) -> float:
        """The bound on connecting: the server's, else the run's (``--connect-timeout``), else the default."""
        if self.connect_timeout is not None:
            return self.connect_timeout
        return run_default if run_default is not None else DEFAULT_CONNECT_TIMEOUT


def server_shape_problems(server: Server) -> list[Problem]:
    """What is wrong with ``server`` as written, each located below it: not exactly one of ``command`` and
    ``url``, a field of the other kind, a template where none is allowed, a character the operating system or
    HTTP cannot carry (:func:`~runner.workflow.literals.server_problems`), a bad ``auth`` block."""
    if server.command is not None and server.url is not None:
        return [
            Problem(
                (),
                "a server has either command (stdio) or url (HTTP), found both",
                "keep command to start a local process, or url to reach a running server",
                at="key",
            )
        ]
    if server.command is None and server.url is None:
        return [
            Problem(
                (),
                "a server needs command (stdio) or url (HTTP), found neither",
                "add command: [program, arg, ...] or url: https://host/mcp",
                at="key",
            )
        ]
    found = _misplaced(server, stdio=server.command is not None)
    found.extend(_untemplated(server))
    found.extend(server_problems(server))
    if server.auth is not None:
        found.extend(auth_problems(server.auth))
    return found


def _misplaced(server: Server, *, stdio: bool) -> list[Problem]:
    """The fields set that belong to the other kind of server."""
    found: list[Problem] = []
    for key, for_stdio in _KIND_FIELDS:
        if getattr(server, key) is not None and for_stdio != stdio:
            kind = "stdio servers (command)" if for_stdio else "HTTP servers (url)"
            found.append(Problem((key,), f"{key} applies only to {kind}", at="key"))
    return found


def _untemplated(server: Server) -> list[Problem]:
    """``command`` and ``cwd`` are read before any input is known to the launch checks: no templates there."""
    found = [
        Problem(("command", n), "templates are not allowed in command")
        for n, arg in enumerate(server.command or ())
        if "${{" in arg
    ]
    if server.command and not server.command[0].strip():
        found.append(Problem(("command", 0), "the program to start (command[0]) is empty"))
    if server.cwd is not None and "${{" in server.cwd:
        found.append(Problem(("cwd",), "templates are not allowed in cwd"))
    return found


def planned_server(
    name: str, server: Server, url: Compiled | None, headers: Compiled | None, env: Compiled | None
) -> PlannedServer:
    """``server`` (valid: :func:`server_shape_problems` found nothing) resolved, its templates compiled by the
    caller."""
    connection: StdioServer | HttpServer
    if server.command is not None:
        connection = StdioServer(tuple(server.command), server.cwd, env, tuple(server.env_passthrough or ()))
    else:
        assert url is not None
        connection = HttpServer(url, headers, server.auth, server.transport or "auto")
    return PlannedServer(
        name=name,
        server=server,
        connection=connection,
        connect_timeout=server.connect_timeout,
        reconnect=server.reconnect if server.reconnect is not None else DEFAULT_RECONNECT,
        max_concurrency=server.max_concurrency,
        rate=server.rate,
        protocol=server.protocol,
        trust_annotations=server.trust_annotations,
        tasks=server.tasks != "off",
    )


def rendered_headers(connection: HttpServer, context: Mapping[str, Any]) -> dict[str, Any]:
    """An HTTP server's headers rendered in ``context``, each value as its template gave it."""
    rendered = connection.headers.render(context) if connection.headers is not None else None
    return dict(rendered or {})


def check_headers(plan: Plan, inputs: Mapping[str, Any], env: Mapping[str, Any], only: str | None = None) -> None:
    """Refuse, before anything is sent, a header of an HTTP server (``only``: of that server) that renders to a
    value HTTP cannot carry (not ASCII: an ``env`` or input value in its template): a ``WorkflowError`` at the
    header's line naming the server and the header (and not the value, which may be a secret)."""
    context = make_context(inputs=inputs, env=env, steps={})
    for name, ps in plan.servers.items():
        if not isinstance(ps.connection, HttpServer) or (only is not None and name != only):
            continue
        for header, value in rendered_headers(ps.connection, context).items():
            problem = header_value_problem(header, "" if value is None else str(value))
            if problem is not None:
                loc: Loc = ("servers", name, "headers", header)
                line, column = plan.positions.locate(loc) if plan.positions is not None else (None, None)
                raise WorkflowError(
                    f"server {name}: {problem} (as rendered from its template)",
                    file=plan.file,
                    line=line,
                    column=column,
                    path=f"servers.{name}.headers.{header}",
                    suggestion=ascii_hint(),
                )
