"""Wiring: from a description of a server (argv or URL) to an open MCP session.

This is the one place that knows the concrete transports. The workflow scheduler never imports it: it is
handed a function that opens sessions (see :mod:`runner.engine.scheduler`). A workflow's server becomes a
:class:`Target` in :func:`render_target`; ``mcp-run tools``/``call`` build theirs with :func:`stdio_target` and
:class:`HttpTarget`, so a stdio server starts by the same rules from either.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from runner.errors import ConnectFailed
from runner.launch import resolve_launch, server_launch, stdio_environment, workflow_folder
from runner.protocol.framing import DEFAULT_MAX_MESSAGE_SIZE
from runner.session import Session, SessionOptions, open_session
from runner.session.negotiate import LEGACY
from runner.workflow.context import make_context
from runner.workflow.plan import Plan
from runner.workflow.servers import HttpServer, check_headers, rendered_headers

if TYPE_CHECKING:  # OAuth (and the HTTP library under it) is imported when an HTTP server needs it
    from runner.auth.config import AuthConfig
    from runner.auth.provider import OAuthProvider

__all__ = ["HttpTarget", "StdioTarget", "Target", "open_target", "render_target", "stdio_target"]


@dataclass(frozen=True, repr=False)
class StdioTarget:
    """A server to start: its argv and working directory (absolute, see :mod:`runner.launch`, or left to the
    operating system: a bare name on PATH, the current directory), and the variables it gets besides the
    allow-list of :mod:`runner.transports.stdio`."""

    command: Sequence[str]
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    redact: Callable[[str], str] | None = field(default=None, compare=False)  # masks secrets in its stderr tail

    def __repr__(self) -> str:  # environment values may be credentials: never print them
        return f"StdioTarget(command={list(self.command)!r}, cwd={self.cwd!r}, env={sorted(self.env)!r})"


@dataclass(frozen=True, repr=False)
class HttpTarget:
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    max_concurrency: int = 8
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    transport: Literal["auto", "streamable-http", "sse"] = "auto"  # auto: Streamable HTTP, else 2024-11-05 HTTP+SSE
    # OAuth (runner.auth): a configuration, or a provider built by the caller; secrets go to on_secret
    auth: AuthConfig | OAuthProvider | None = field(default=None, compare=False)
    on_secret: Callable[[str], None] | None = field(default=None, compare=False)

    def __repr__(self) -> str:  # header values are credentials: never print them
        return f"HttpTarget(url={self.url!r}, headers={sorted(self.headers)!r})"


Target = StdioTarget | HttpTarget


def stdio_target(
    command: Sequence[str],
    *,
    base: str,
    cwd: str | None,
    env: Mapping[str, str],
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    redact: Callable[[str], str] | None = None,
) -> StdioTarget:
    """A stdio server to start, its program and working directory resolved from ``base``
    (:func:`runner.launch.resolve_launch`; :class:`~runner.launch.LaunchError` when it cannot start)."""
    launch = resolve_launch(command, base=base, cwd=cwd, path=env.get("PATH"))
    return StdioTarget(
        command=list(launch.argv), cwd=launch.cwd, env=env, max_message_size=max_message_size, redact=redact
    )


def render_target(
    plan: Plan,
    name: str,
    inputs: Mapping[str, Any],
    env: Mapping[str, Any],
    *,
    legacy: bool = False,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    on_secret: Callable[[str], None] | None = None,
) -> Target:
    """Server ``name`` as a connectable target: an HTTP server's URL and headers rendered; a stdio server's
    program and working directory resolved (:mod:`runner.launch`: relative paths from the workflow's folder;
    :class:`~runner.launch.LaunchError` naming the server and its line when it cannot start) and its
    environment chosen (``env_passthrough`` from mcp-run's environment, then ``env``, which wins).

    ``legacy``: the run was begun by an mcp-run whose stdio servers started in the caller's directory
    (journal format 1): they keep starting there, their program found as that version found it, so the
    rest of the run reads and writes where its beginning did.

    ``max_message_size``: the largest message accepted from the server (``--max-message-size``).

    ``on_secret``: told every token an HTTP server's OAuth obtains (the run's masker registers it)."""
    ps = plan.servers[name]
    connection = ps.connection
    if isinstance(connection, HttpServer):
        from runner.auth.fromworkflow import auth_config

        check_headers(plan, inputs, env, only=name)
        context = make_context(inputs=inputs, env=env, steps={})
        return HttpTarget(
            url=str(connection.url.render(context)),
            headers={k: str(v) for k, v in rendered_headers(connection, context).items()},
            max_concurrency=ps.max_concurrency,
            max_message_size=max_message_size,
            transport=connection.transport,
            auth=auth_config(connection.auth) if connection.auth is not None else None,
            on_secret=on_secret,
        )
    server_env = stdio_environment(plan, name, inputs, env)
    if legacy:
        cwd = None if connection.cwd is None else os.path.join(workflow_folder(plan), connection.cwd)
        return StdioTarget(command=list(connection.command), cwd=cwd, env=server_env, max_message_size=max_message_size)
    launch = server_launch(plan, name, server_env.get("PATH"))
    return StdioTarget(command=list(launch.argv), cwd=launch.cwd, env=server_env, max_message_size=max_message_size)


def _auth_provider(target: HttpTarget) -> OAuthProvider | None:
    if target.auth is None:
        return None
    from runner.auth.provider import OAuthProvider

    if isinstance(target.auth, OAuthProvider):
        return target.auth
    from runner.auth.store import TokenStore

    store = TokenStore() if target.auth.grant == "login" else None
    return OAuthProvider(target.url, target.auth, on_secret=target.on_secret, store=store)


@asynccontextmanager
async def open_target(target: Target, options: SessionOptions) -> AsyncIterator[Session]:
    """Start or reach the server, run the handshake, yield the session; close everything on exit."""
    if isinstance(target, StdioTarget):
        from runner.transports.stdio import StdioParams, open_stdio_transport

        params = StdioParams(
            command=list(target.command),
            cwd=target.cwd,
            env=dict(target.env),
            max_message_size=target.max_message_size,
            redact=target.redact,
        )
        async with open_stdio_transport(params) as transport, open_session(transport, options) as session:
            yield session
    else:
        from runner.transports.http.legacy_sse import open_legacy_sse_transport, speaks_legacy_sse
        from runner.transports.http.transport import HttpParams, open_http_transport

        http_params = HttpParams(
            url=target.url,
            headers=dict(target.headers),
            max_connections=target.max_concurrency,
            max_event_bytes=target.max_message_size,
            connect_timeout=options.initialize_timeout,
            auth=_auth_provider(target),
        )
        if target.transport != "sse":
            entered = False
            try:
                async with open_http_transport(http_params) as http, open_session(http, options) as session:
                    entered = True
                    yield session
                    return
            except ConnectFailed as exc:
                if entered or target.transport != "auto" or not speaks_legacy_sse(exc):
                    raise
                refusal = exc
            if options.on_warning is not None:
                options.on_warning(
                    f"{options.name}: the server speaks the 2024-11-05 HTTP+SSE transport (deprecated): "
                    f"{refusal.__cause__ or refusal}; using it (transport: sse in the workflow skips the first try)"
                )
        if http_params.auth is not None:
            raise ConnectFailed(
                f"{options.name}: OAuth (auth:) is not supported over the 2024-11-05 HTTP+SSE transport, which "
                "this server speaks; give a token in headers: instead"
            )
        # The 2024-11-05 era: the initialize handshake, no server/discover probe (now, and on reconnects).
        options.era_memory.version = LEGACY
        async with open_legacy_sse_transport(http_params) as sse, open_session(sse, options) as session:
            yield session
